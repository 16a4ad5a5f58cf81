#!/usr/bin/env python3
"""The one list of elementwise op codes shared by the device backends' host tables and kernels.

Usage: ew_ops.py --backend NAME --out OUT.h [--check FILE:GROUP[,GROUP...]]...

Writes OUT.h, a header valid as C++, OpenCL C, GLSL and CUDA: one `#define CTN_EW_<OP> <code>`
per op (the case labels of the kernels' switches) and, for C++ only, `ctn_ew::kOps`, the host
table of the ops NAME runs (op name, group, code, number of inputs, integer support).

Each --check names a kernel source and the groups whose switch it holds: every op of those
groups that NAME runs must have a `case CTN_EW_<OP>:` label in that file, and no switch holding
such a label may have a `default:` branch (an unknown code is an error, never a fallback op).
A failed check writes nothing and exits 1, so the plugin does not build. Runs on the build
machine (Meson's native python3), so cross builds work unchanged.
"""
import argparse
import os
import re
import sys

# Groups: (name, first code, inputs). Code ranges tell a Vulkan ew.comp shader its arity:
# codes >= TWO read a second input, >= THREE a third, >= FOUR a fourth, >= STEP an i64 step.
GROUPS = [
    ('unary', 1, 1),
    ('binary', 40, 2),
    ('grad', 50, 2),      # backward helpers: (forward value, upstream gradient)
    ('optim2', 70, 2),
    ('optim3', 80, 3),
    ('optim4', 90, 4),
    ('step', 100, None),  # the last input is an i64 step
    ('compare', 110, 2),  # bool output
]

# The list: (op name as in abi/chutney/ops.h, group, backends running it through these codes,
# integer dtypes supported where the backend offers them, FORMULA). Append within a group: codes
# are positions, and a code must stay below the next group's first code.
#
# FORMULA: the op's math, one C-like expression from which every backend's code is generated
# (see lower()): inputs `x` (unary) or `a`, `b` (binary, grad: a = forward value, b = upstream
# gradient), float attributes `f0`, `f1`; numbers (typed as the element type T on every target);
# the functions of FUNCS; C operators (?: included). A dict maps a backend to its own expression
# where numerics demand one (say why next to it); None: the op is written by hand in each
# backend's kernel (optimizer steps, dropout, comparisons).
SIGMOID = 'x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x))'
OPS = [
    ('neg', 'unary', 'cpu ocl vk cuda', True, '-x'),
    ('exp', 'unary', 'cpu ocl vk cuda', False, 'exp(x)'),
    ('log', 'unary', 'cpu ocl vk cuda', False, 'log(x)'),
    ('sqrt', 'unary', 'cpu ocl vk cuda', False, 'sqrt(x)'),
    # GLSL's abs/sign: what the Vulkan shader has always used (abs(-0) = +0 there).
    ('abs', 'unary', 'cpu ocl vk cuda', True, {'': 'x < 0 ? -x : x', 'vk': 'abs(x)'}),
    ('sign', 'unary', 'cpu ocl vk cuda', True, {'': 'x > 0 ? 1 : x < 0 ? -1 : 0', 'vk': 'sign(x)'}),
    ('tanh', 'unary', 'cpu ocl vk cuda', False, 'tanh(x)'),
    ('sigmoid', 'unary', 'cpu ocl vk cuda', False, SIGMOID),
    ('relu', 'unary', 'cpu ocl vk cuda', True, 'x > 0 ? x : 0'),
    ('gelu', 'unary', 'cpu ocl vk cuda', False, '0.5 * x * (1 + erf(x * 0.70710678118654752440))'),
    ('leaky_relu', 'unary', 'cpu ocl vk cuda', False, 'x > 0 ? x : x * f0'),
    ('clamp', 'unary', 'cpu ocl vk cuda', False, 'x < f0 ? f0 : x > f1 ? f1 : x'),
    ('erf', 'unary', 'cpu ocl vk cuda', False, 'erf(x)'),
    ('atan', 'unary', 'cpu ocl vk cuda', False, 'atan(x)'),
    ('sin', 'unary', 'cpu ocl vk cuda', False, 'sin(x)'),
    ('cos', 'unary', 'cpu ocl vk cuda', False, 'cos(x)'),
    ('tan', 'unary', 'cpu ocl vk cuda', False, 'tan(x)'),
    # Not on Vulkan: GLSL has these for 32-bit floats only and no m_* series for f64 yet; a
    # Vulkan plan runs them on the CPU (placement falls back per op).
    ('asin', 'unary', 'cpu ocl cuda', False, 'asin(x)'),
    ('acos', 'unary', 'cpu ocl cuda', False, 'acos(x)'),
    ('sinh', 'unary', 'cpu ocl cuda', False, 'sinh(x)'),
    ('cosh', 'unary', 'cpu ocl cuda', False, 'cosh(x)'),
    ('asinh', 'unary', 'cpu ocl cuda', False, 'asinh(x)'),
    ('acosh', 'unary', 'cpu ocl cuda', False, 'acosh(x)'),
    ('atanh', 'unary', 'cpu ocl cuda', False, 'atanh(x)'),
    ('add', 'binary', 'cpu ocl vk cuda', True, 'a + b'),
    ('sub', 'binary', 'cpu ocl vk cuda', True, 'a - b'),
    ('mul', 'binary', 'cpu ocl vk cuda', True, 'a * b'),
    ('div', 'binary', 'cpu ocl vk cuda', False, 'a / b'),
    ('pow', 'binary', 'cpu ocl vk cuda', False, 'pow(a, b)'),
    # NaN propagates (a != a); GLSL spells the test isnan, as the shader always did.
    ('maximum', 'binary', 'cpu ocl vk cuda', True, {'': '(a > b || a != a) ? a : b', 'vk': '(a > b || isnan(a)) ? a : b'}),
    ('minimum', 'binary', 'cpu ocl vk cuda', True, {'': '(a < b || a != a) ? a : b', 'vk': '(a < b || isnan(a)) ? a : b'}),
    ('relu_grad', 'grad', 'cpu ocl vk cuda', False, 'a > 0 ? b : 0'),
    ('leaky_relu_grad', 'grad', 'cpu ocl vk cuda', False, 'a > 0 ? b : b * f0'),
    ('gelu_grad', 'grad', 'cpu ocl vk cuda', False,
     'b * (0.5 * (1 + erf(a * 0.70710678118654752440)) + a * (exp(-0.5 * a * a) * 0.39894228040143267794))'),
    ('clamp_grad', 'grad', 'cpu ocl vk cuda', False, '(a >= f0 && a <= f1) ? b : 0'),
    ('tanh_grad', 'grad', 'cpu ocl vk cuda', False, 'b * (1 - a * a)'),
    ('sigmoid_grad', 'grad', 'cpu ocl vk cuda', False, 'b * a * (1 - a)'),
    ('adam_moment1', 'optim2', 'vk', False, None),
    ('adam_moment2', 'optim2', 'vk', False, None),
    ('sgd_velocity', 'optim3', 'vk', False, None),
    ('sgd_apply', 'optim4', 'vk', False, None),
    ('adam_apply', 'step', 'vk', False, None),
    ('dropout', 'step', 'vk', False, None),
    ('eq', 'compare', 'ocl vk cuda', True, None),
    ('ne', 'compare', 'ocl vk cuda', True, None),
    ('lt', 'compare', 'ocl vk cuda', True, None),
    ('le', 'compare', 'ocl vk cuda', True, None),
    ('gt', 'compare', 'ocl vk cuda', True, None),
    ('ge', 'compare', 'ocl vk cuda', True, None),
]
# Inputs of the 'step' group's ops (x..., step).
STEP_INPUTS = {'adam_apply': 5, 'dropout': 2}
BACKENDS = ('cpu', 'ocl', 'vk', 'cuda')


def codes():
    """[(op, group, code, inputs, backends, ints)] with codes assigned by position."""
    first = {g: (c, n) for g, c, n in GROUPS}
    limits = {GROUPS[i][0]: GROUPS[i + 1][1] for i in range(len(GROUPS) - 1)}
    used, out = {}, []
    for op, group, backends, ints, formula in OPS:
        if group not in first:
            raise SystemExit('ew_ops.py: op %s has unknown group %s' % (op, group))
        base, nin = first[group]
        code = base + used.get(group, 0)
        used[group] = used.get(group, 0) + 1
        if group in limits and code >= limits[group]:
            raise SystemExit('ew_ops.py: group %s is full (code %d)' % (group, code))
        bs = backends.split()
        for b in bs:
            if b not in BACKENDS:
                raise SystemExit('ew_ops.py: op %s names unknown backend %s' % (op, b))
        out.append((op, group, code, nin if nin else STEP_INPUTS[op], bs, ints))
    return out


# ---- formulas -> code ----------------------------------------------------------------------
# Each target's spelling of the formula language's functions. GLSL has exp/log/pow/tanh/atan/sin/
# cos/tan for 32-bit floats only and erf for neither: m_* (backends/vulkan/shaders/math.glsl) are the
# built-ins for f32 (erf: a series) and range reduction + series for f64, so every dtype the
# Vulkan backend runs (f32, f64) has every function. OpenCL C and CUDA have them all for float
# and double (OpenCL's double where the device has cl_khr_fp64); the CPU uses <cmath>.
FUNCS = {
    'cpu': {'exp': 'std::exp', 'log': 'std::log', 'sqrt': 'std::sqrt', 'tanh': 'std::tanh',
            'erf': 'std::erf', 'pow': 'std::pow', 'atan': 'std::atan', 'sin': 'std::sin', 'cos': 'std::cos',
            'tan': 'std::tan', **{f: 'std::' + f for f in ('asin', 'acos', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh')}},
    'ocl': {f: f for f in ('exp', 'log', 'sqrt', 'tanh', 'erf', 'pow', 'atan', 'sin', 'cos', 'tan', 'asin', 'acos',
                           'sinh', 'cosh', 'asinh', 'acosh', 'atanh')},
    'cuda': {f: f for f in ('exp', 'log', 'sqrt', 'tanh', 'erf', 'pow', 'atan', 'sin', 'cos', 'tan', 'asin', 'acos',
                            'sinh', 'cosh', 'asinh', 'acosh', 'atanh')},
    'vk': {'exp': 'm_exp', 'log': 'm_log', 'sqrt': 'sqrt', 'tanh': 'm_tanh', 'erf': 'm_erf',
           'pow': 'm_pow', 'atan': 'm_atan', 'sin': 'm_sin', 'cos': 'm_cos', 'tan': 'm_tan', 'abs': 'abs',
           'sign': 'sign', 'isnan': 'isnan'},
}
HEAVY = ('exp', 'log', 'tanh', 'erf', 'pow', 'atan', 'sin', 'cos', 'tan', 'asin', 'acos', 'sinh', 'cosh', 'asinh',
         'acosh', 'atanh')  # transcendental: the CPU threads them sooner
VARS = {'unary': ('x', 'f0', 'f1'), 'binary': ('a', 'b', 'f0', 'f1'), 'grad': ('a', 'b', 'f0', 'f1')}
TOKEN = re.compile(r'\s+|(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?|[A-Za-z_]\w*|\|\||&&|[<>=!]=|[-+*/()?:<>,]')


def formula_of(entry, backend):
    f = entry[4]
    if isinstance(f, dict):
        return f.get(backend, f[''])
    return f


def lower(op, group, text, backend, f64=False):
    """The formula as `backend`'s code: numbers typed T, functions renamed, variables as
    macro parameters (CPU: the functor's arguments and attributes)."""
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SystemExit('ew_ops.py: op %s: cannot read formula at %r' % (op, text[pos:]))
        tok, pos = m.group(0), m.end()
        if m.group(1):
            lit = tok
            if backend == 'vk' and f64 and ('.' in tok or 'e' in tok.lower()):
                lit = tok + 'LF'  # GLSL: a literal without LF is a float
            out.append('((T)%s)' % lit if backend == 'ocl' else 'T(%s)' % lit)
        elif tok[0].isalpha() or tok[0] == '_':
            if tok in VARS[group]:
                if backend == 'cpu':
                    out.append('T(p.%s)' % tok if tok[0] == 'f' else tok)
                else:
                    out.append('(%s)' % tok)
            elif tok in FUNCS[backend]:
                out.append(FUNCS[backend][tok])
            else:
                raise SystemExit('ew_ops.py: op %s: %s is neither an input of a %s op nor a function '
                                 'the %s backend has' % (op, tok, group, backend))
        else:
            out.append(tok)
    return ''.join(out)


def formula_ops(table, backend, group):
    return [e for e, t in zip(OPS, table) if t[1] == group and backend in t[4] and e[4] is not None]


def camel(op):
    return ''.join(w.capitalize() for w in op.split('_'))


def cases_macros(backend, table, f64=False):
    """`#define CTN_EW_CASES_<GROUP>_<INT|FLOAT>(vars) case CTN_EW_<OP>: return <expr>; ...`: the
    switch bodies of the device kernels, ops with integer semantics apart from float-only ones."""
    lines = []
    for group in VARS:
        for kind in ('INT', 'FLOAT'):
            ents = [e for e in formula_ops(table, backend, group) if e[3] == (kind == 'INT')]
            body = ''.join(' \\\n  case CTN_EW_%s: return %s;' %
                           (e[0].upper(), lower(e[0], group, formula_of(e, backend), backend, f64))
                           for e in ents)
            lines.append('#define CTN_EW_CASES_%s_%s(%s)%s' % (group.upper(), kind, ', '.join(VARS[group]), body))
    return lines


def cpu_code(table):
    """The CPU backend's functors (k_elementwise.cpp's Params in scope) and its table rows."""
    lines = []
    rows = []
    for group in VARS:
        for e in formula_ops(table, 'cpu', group):
            op, ints = e[0], e[3]
            text = formula_of(e, 'cpu')
            args = 'T x' if group == 'unary' else 'T a, T b'
            lines.append('template <class T> struct %s {' % camel(op))
            lines.append('  Params p;')
            lines.append('  T operator()(%s) const { return %s; }' % (args, lower(op, group, text, 'cpu')))
            lines.append('};')
            heavy = 'true' if any(re.search(r'\b%s\(' % h, text) for h in HEAVY) else 'false'
            if group == 'unary':
                rows.append('CTN_UNARY_INT("%s", %s)' % (op, camel(op)) if ints else
                            'CTN_UNARY("%s", %s, %s)' % (op, camel(op), heavy))
            else:
                rows.append('CTN_BIN_INT("%s", %s)' % (op, camel(op)) if ints else
                            'CTN_BIN("%s", k%s, %s, %s)' % (op, group.capitalize(), camel(op), heavy))
    lines.append('')
    lines.append('// The table rows; the includer defines CTN_UNARY[_INT] and CTN_BIN[_INT] (the CPU\'s also')
    lines.append('// instantiate each formula\'s f16/bf16 loop from its f32 functor: k_elementwise.cpp).')
    lines.append('#define CTN_EW_CPU_ROWS \\')
    lines.append(', \\\n'.join('    ' + r for r in rows))
    return lines


def header(backend, table):
    lines = ['/* Generated by backends/common/ew_ops.py for the %s backend. Do not edit: change',
             ' * the list in ew_ops.py. Valid as C++, OpenCL C, GLSL and CUDA. */',
             '#ifndef CTN_EW_OPS_GENERATED_H', '#define CTN_EW_OPS_GENERATED_H', '']
    lines[0] = lines[0] % backend
    for g, c, _ in GROUPS:
        lines.append('#define CTN_EW_FIRST_%s %d' % (g.upper(), c))
    lines.append('')
    for op, _, code, _, _, _ in table:
        lines.append('#define CTN_EW_%s %d' % (op.upper(), code))
    lines.append('')
    if backend == 'cpu':
        lines += ['#ifdef CTN_EW_CPU_FUNCTORS'] + cpu_code(table) + ['#endif', '#endif', '']
        return '\n'.join(lines)
    lines.append('/* The switch bodies, generated from the formulas: `case CTN_EW_<OP>: return <expr>;` with')
    lines.append(' * the arguments as the inputs (x; a, b) and float attributes (f0, f1). */')
    if backend == 'vk':
        lines += ['#ifdef USE_F64'] + cases_macros(backend, table, True) + ['#else'] + \
            cases_macros(backend, table) + ['#endif']
    else:
        lines += cases_macros(backend, table)
    lines += ['', '#ifdef __cplusplus', '#include <cstring>', '',
              'namespace ctn_ew {', '',
              'enum Group { %s };' % ', '.join('k' + g.capitalize() for g, _, _ in GROUPS), '',
              'struct Op {',
              '  const char *name;  // the CTN_OP_* name',
              '  Group group;',
              '  int code;     // CTN_EW_* (the case label in the kernels)',
              '  unsigned nin;  // inputs',
              '  bool ints;     // has integer semantics (i32/i64) where the backend offers them',
              '};', '',
              '// The ops this backend runs through these codes.',
              'inline constexpr Op kOps[] = {']
    for op, group, code, nin, bs, ints in table:
        if backend in bs:
            lines.append('    {"%s", k%s, CTN_EW_%s, %d, %s},' %
                         (op, group.capitalize(), op.upper(), nin, 'true' if ints else 'false'))
    lines += ['};', '',
              '// The entry of op `name`, or nullptr when this backend has none.',
              'inline const Op *find(const char *name) {',
              '  for (const Op &o : kOps)',
              '    if (!std::strcmp(o.name, name)) return &o;',
              '  return nullptr;',
              '}', '',
              '}  // namespace ctn_ew',
              '#endif', '', '#endif', '']
    return '\n'.join(lines)


def check(backend, table, spec):
    path, _, groups = spec.rpartition(':')
    if not path or not groups:
        raise SystemExit('ew_ops.py: --check wants FILE:GROUP[,GROUP...], got ' + spec)
    groups = groups.split(',')
    for g in groups:
        if g not in [x[0] for x in GROUPS]:
            raise SystemExit('ew_ops.py: --check %s: unknown group %s' % (spec, g))
    with open(path, encoding='utf-8') as f:
        text = f.read()
    errors = []
    labels = set(re.findall(r'case\s+CTN_EW_([A-Z0-9_]+)\s*:', text))
    generated = {e[0] for g in VARS for e in formula_ops(table, backend, g)}
    for op, group, _, _, bs, ints in table:
        if op in generated and group in groups:
            macro = 'CTN_EW_CASES_%s_%s' % (group.upper(), 'INT' if ints else 'FLOAT')
            if macro not in text:
                errors.append('%s: does not expand %s (op %s)' % (path, macro, op))
            if op.upper() in labels:
                errors.append('%s: `case CTN_EW_%s:` is written by hand; its formula is in ew_ops.py' %
                              (path, op.upper()))
            continue
        if group in groups and backend in bs and op.upper() not in labels:
            errors.append('%s: no `case CTN_EW_%s:` (op %s, group %s)' %
                          (path, op.upper(), op, group))
    known = {op.upper() for op, *_ in table}
    for name in sorted(labels - known):
        errors.append('%s: `case CTN_EW_%s:` is not in the list' % (path, name))
    # A `default:` in a switch over op codes: look back to the nearest `switch`.
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not re.search(r'\bdefault\s*:', line):
            continue
        j = i - 1
        while j >= 0 and not re.search(r'\bswitch\s*\(', lines[j]):
            j -= 1
        if any('case CTN_EW_' in l for l in lines[max(j, 0):i]):
            errors.append('%s:%d: a switch over CTN_EW_ codes has a default: branch' %
                          (path, i + 1))
    return errors


def self_test():
    """The check refuses a switch that lacks a listed case or has a default: branch, and a kernel
    that does not expand the generated cases of a group; every formula lowers on every backend."""
    import tempfile
    table = codes()
    src = 'switch (op) {\n' + ''.join('  case CTN_EW_%s: r = 1; break;\n' % op.upper()
                                       for op, g, *_ in table if g == 'compare')
    gen = 'CTN_EW_CASES_UNARY_INT(x, f0, f1) CTN_EW_CASES_UNARY_FLOAT(x, f0, f1)\n'
    with tempfile.TemporaryDirectory() as d:
        def run(text, groups):
            path = os.path.join(d, 'k.cl')
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text + '}\n')
            return check('ocl', table, path + ':' + groups)
        ok = run(src + gen, 'compare,unary')
        missing = run(src.replace('  case CTN_EW_EQ: r = 1; break;\n', ''), 'compare')
        default = run(src + '  default: r = 0;\n', 'compare')
        no_macro = run(src + gen.split(' ')[0], 'unary')
        by_hand = run(src + gen + '  case CTN_EW_EXP: r = 1; break;\n', 'unary')
    if ok or len(missing) != 1 or 'CTN_EW_EQ' not in missing[0] or len(default) != 1 or \
            'default' not in default[0] or not no_macro or \
            not all('CTN_EW_CASES_UNARY_FLOAT' in e for e in no_macro) or len(by_hand) != 1:
        print('ew_ops.py self-test failed: %r %r %r %r %r' % (ok, missing, default, no_macro, by_hand),
              file=sys.stderr)
        return 1
    codes_seen = [c for _, _, c, *_ in table]
    if len(set(codes_seen)) != len(codes_seen):
        print('ew_ops.py self-test failed: duplicate codes', file=sys.stderr)
        return 1
    for b in BACKENDS:
        header(b, table)  # every formula lowers (an unknown name exits with the op named)
    print('ew_ops.py self-test: ok (%d ops, %d from formulas)' %
          (len(table), sum(e[4] is not None for e in OPS)))
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 epilog='ew_ops.py --self-test checks the checker itself.')
    ap.add_argument('--backend', required=True, choices=BACKENDS)
    ap.add_argument('--out', required=True, help='the header to write')
    ap.add_argument('--check', action='append', default=[], metavar='FILE:GROUPS',
                    help='kernel source and the groups its switches cover')
    args = ap.parse_args()
    table = codes()
    errors = []
    for spec in args.check:
        errors += check(args.backend, table, spec)
    if errors:
        for e in errors:
            print('ew_ops.py: ' + e, file=sys.stderr)
        return 1
    tmp = args.out + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(header(args.backend, table))
    os.replace(tmp, args.out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
