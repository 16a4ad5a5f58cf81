package cdecl

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// RustHeaders are the headers chutney-sys declares, in the order of the generated file.
var RustHeaders = []string{"version.h", "types.h", "chutney.h", "nn.h", "data.h", "checkpoint.h",
	"onnx.h", "plugin.h", "oplib.h", "collective.h", "opencl.h", "vulkan.h", "cuda.h"}

// API is the parse of a set of headers with the lookups the generators share.
type API struct {
	Headers  []*Header
	consts   map[string]*Const
	constTy  map[string]string // Rust type of each constant
	structs  map[string]*Struct
	typedefs map[string]*Typedef
	arrayLen map[string]bool // constants used as array lengths
}

// NewAPI indexes headers and decides the Rust type of every constant.
func NewAPI(hs []*Header) *API {
	a := &API{Headers: hs, consts: map[string]*Const{}, constTy: map[string]string{},
		structs: map[string]*Struct{}, typedefs: map[string]*Typedef{}, arrayLen: map[string]bool{}}
	for _, h := range hs {
		for i := range h.Structs {
			a.structs[h.Structs[i].Name] = &h.Structs[i]
			for _, f := range h.Structs[i].Fields {
				if f.Len != "" {
					a.arrayLen[f.Len] = true
				}
			}
		}
		for i := range h.Typedefs {
			a.typedefs[h.Typedefs[i].Name] = &h.Typedefs[i]
		}
	}
	for _, h := range hs {
		for i := range h.Consts {
			c := &h.Consts[i]
			a.consts[c.Name] = c
			a.constTy[c.Name] = a.constType(h.Name, c)
		}
	}
	return a
}

var (
	castRe   = regexp.MustCompile(`^\(\(([a-z_0-9]+)\)`)
	suffixRe = regexp.MustCompile(`\b(0x[0-9a-fA-F]+|[0-9]+)[uUlL]+\b`)
	identRe  = regexp.MustCompile(`\b[A-Z][A-Z0-9_]+\b`)
)

// constType: an enum member has its enum's type (an i32 alias), a cast names the type, a
// constant used as an array length is a usize, version.h's are u32 (what ctn_abi_version
// returns), `u` is u32, `ull` or UINT64_MAX u64, a plain number i32, an expression the type of
// the constants it uses.
func (a *API) constType(header string, c *Const) string {
	switch {
	case c.Str:
		return "&[u8]"
	case c.Enum != "":
		return c.Enum
	case castRe.MatchString(c.Expr):
		return castRe.FindStringSubmatch(c.Expr)[1]
	case a.arrayLen[c.Name]:
		return "usize"
	case header == "version.h":
		return "u32"
	case strings.Contains(strings.ToLower(c.Expr), "ull") || strings.Contains(c.Expr, "UINT64_MAX"):
		return "u64"
	case strings.HasSuffix(c.Expr, "u"):
		return "u32"
	}
	for _, id := range identRe.FindAllString(c.Expr, -1) {
		if t, ok := a.constTy[id]; ok {
			return t
		}
	}
	return "i32"
}

// rustExpr turns a C constant expression into Rust: suffixes and casts dropped.
func rustExpr(c *Const) string {
	if c.Str {
		return "b" + strings.TrimSuffix(c.Expr, `"`) + `\0"`
	}
	e := castRe.ReplaceAllString(c.Expr, "(")
	e = strings.ReplaceAll(e, "UINT64_MAX", "u64::MAX")
	e = suffixRe.ReplaceAllString(e, "$1")
	for strings.HasPrefix(e, "(") && strings.HasSuffix(e, ")") && balanced(e[1:len(e)-1]) {
		e = e[1 : len(e)-1]
	}
	return e
}

func balanced(s string) bool {
	d := 0
	for _, c := range s {
		if c == '(' {
			d++
		} else if c == ')' {
			if d--; d < 0 {
				return false
			}
		}
	}
	return d == 0
}

var rustPrim = map[string]string{
	"int8_t": "i8", "uint8_t": "u8", "int16_t": "i16", "uint16_t": "u16", "int32_t": "i32",
	"uint32_t": "u32", "int64_t": "i64", "uint64_t": "u64", "int": "i32", "unsigned": "u32",
	"float": "f32", "double": "f64", "size_t": "usize", "char": "c_char", "void": "c_void",
}

var rustKeywords = map[string]bool{"fn": true, "type": true, "in": true, "ref": true,
	"mod": true, "move": true, "match": true, "loop": true, "use": true, "where": true,
	"self": true, "box": true, "impl": true, "trait": true, "crate": true}

// RustName is a C identifier as a Rust one: keywords get a trailing underscore (fn -> fn_).
func RustName(n string) string {
	if rustKeywords[n] {
		return n + "_"
	}
	return n
}

// rustType translates a C type as this parser writes it.
func rustType(t string) (string, error) {
	t = strings.TrimSpace(strings.ReplaceAll(" "+t+" ", " struct ", " "))
	if i := strings.Index(t, "(*)"); i >= 0 {
		return rustFnPtr(t[:i], t[i+3:])
	}
	parts := strings.Split(t, "*")
	base := strings.TrimSpace(parts[0])
	isConst := strings.HasPrefix(base, "const ") || strings.HasSuffix(base, " const")
	base = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(base, "const "), " const"))
	if strings.Contains(base, " ") {
		return "", fmt.Errorf("unknown C type %q", t)
	}
	r, ok := rustPrim[base]
	if !ok {
		r = base
	}
	for _, q := range parts[1:] {
		if isConst {
			r = "*const " + r
		} else {
			r = "*mut " + r
		}
		isConst = strings.TrimSpace(q) == "const"
	}
	if r == "c_void" {
		return "", fmt.Errorf("void is not a value type")
	}
	return r, nil
}

// rustFnPtr: "ret", "(params)" -> Option<unsafe extern "C" fn(params) -> ret>.
func rustFnPtr(ret, params string) (string, error) {
	sig, err := rustSig(strings.TrimSpace(ret), strings.TrimSpace(params))
	if err != nil {
		return "", err
	}
	return `Option<unsafe extern "C" fn` + sig + ">", nil
}

// rustSig: "(p: T, ...) -> R" of a C return type and parenthesised parameter list.
func rustSig(ret, params string) (string, error) {
	inner := strings.TrimSpace(params[1 : len(params)-1])
	var ps []string
	if inner != "" && inner != "void" {
		parts, ok := splitTop(inner)
		if !ok {
			return "", fmt.Errorf("unbalanced parameters %q", params)
		}
		for _, p := range parts {
			p = strings.TrimSpace(p)
			if p == "..." {
				ps = append(ps, "...")
				continue
			}
			pp, err := parseParam(p)
			if err != nil {
				return "", err
			}
			rt, err := rustType(pp.Type)
			if err != nil {
				return "", fmt.Errorf("parameter %s: %v", pp.Name, err)
			}
			ps = append(ps, RustName(pp.Name)+": "+rt)
		}
	}
	s := "(" + strings.Join(ps, ", ") + ")"
	if ret != "void" {
		rt, err := rustType(ret)
		if err != nil {
			return "", fmt.Errorf("return type: %v", err)
		}
		s += " -> " + rt
	}
	return s, nil
}

// numeric tells whether a Rust field type is a number or an array of numbers.
func numeric(t string) bool {
	t = strings.TrimPrefix(t, "[")
	if i := strings.Index(t, ";"); i >= 0 {
		t = t[:i]
	}
	switch t {
	case "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "usize":
		return true
	}
	return false
}

// GenerateRust writes the Rust FFI declarations of RustHeaders (src/ffi.rs of chutney-sys).
func (a *API) GenerateRust() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// " + Generated + "\n" +
		"// Regenerate: cd bindings/go && GOPROXY=off go generate ./chutney\n\n")
	var left []string
	for _, h := range a.Headers {
		if !contains(RustHeaders, h.Name) {
			for _, f := range h.Funcs {
				left = append(left, fmt.Sprintf("    (%q, \"%s: the header is not covered by chutney-sys\"),\n", f.Name, h.Name))
			}
			continue
		}
		fmt.Fprintf(&b, "// ---- %s %s\n\n", h.Name, strings.Repeat("-", 90-len(h.Name)))
		if err := a.rustHeader(&b, h); err != nil {
			return nil, fmt.Errorf("%s: %v", h.Name, err)
		}
	}
	// X::sized() for the structs that begin with their own struct_size (not ctn_plugin_header,
	// embedded at the start of a descriptor whose size it holds).
	var sized []string
	structs, _, _, _ := a.covered()
	embedded := map[string]bool{}
	for _, s := range structs {
		for _, f := range s.Fields {
			embedded[f.Type] = true
		}
	}
	for _, s := range structs {
		if len(s.Fields) > 0 && s.Fields[0].Name == "struct_size" && s.Fields[0].Type == "uint32_t" && !embedded[s.Name] {
			sized = append(sized, s.Name)
		}
	}
	b.WriteString("sized_structs!(" + strings.Join(sized, ", ") + ");\n\n")
	b.WriteString("/// CTN_API functions of the headers chutney-sys does not cover, with the reason.\n")
	b.WriteString("pub const LEFT_OUT: &[(&str, &str)] = &[\n" + strings.Join(left, "") + "];\n")
	return b.Bytes(), nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func (a *API) rustHeader(b *bytes.Buffer, h *Header) error {
	for i := range h.Consts {
		c := &h.Consts[i]
		fmt.Fprintf(b, "pub const %s: %s = %s;\n", c.Name, a.constTy[c.Name], rustExpr(c))
	}
	for _, t := range h.Typedefs {
		var rt string
		var err error
		if t.Type == "enum" {
			rt = "i32"
		} else if rt, err = rustType(t.Type); err != nil {
			return fmt.Errorf("typedef %s: %v", t.Name, err)
		}
		fmt.Fprintf(b, "/// C `%s` (%s).\npub type %s = %s;\n", t.Name, h.Name, t.Name, rt)
	}
	var opaque []string
	for _, s := range h.Structs {
		if s.Opaque {
			opaque = append(opaque, s.Name)
		}
	}
	if len(opaque) > 0 {
		b.WriteString("opaque! {\n")
		for _, n := range opaque {
			fmt.Fprintf(b, "    %s;\n", n)
		}
		b.WriteString("}\n")
	}
	for _, s := range h.Structs {
		if s.Opaque {
			continue
		}
		var fields []string
		def, eq := true, true
		for _, f := range s.Fields {
			rt, err := rustType(f.Type)
			if err != nil {
				return fmt.Errorf("%s.%s: %v", s.Name, f.Name, err)
			}
			if f.Len != "" {
				rt = "[" + rt + "; " + f.Len + "]"
			}
			if !numeric(rt) {
				eq = false
				if !strings.HasPrefix(rt, "Option<") {
					if o := a.structs[rt]; o == nil || !a.derivesDefault(o) {
						def = false
					}
				}
			}
			fields = append(fields, fmt.Sprintf("    pub %s: %s,\n", RustName(f.Name), rt))
		}
		derives := "Debug, Clone, Copy"
		if def {
			derives += ", Default"
		}
		if eq {
			derives += ", PartialEq"
		}
		fmt.Fprintf(b, "/// C `%s` (%s).\n#[repr(C)]\n#[derive(%s)]\npub struct %s {\n%s}\n",
			s.Name, h.Name, derives, s.Name, strings.Join(fields, ""))
	}
	if len(h.Funcs) > 0 {
		b.WriteString("extern \"C\" {\n")
		for _, f := range h.Funcs {
			ps := make([]string, len(f.Params))
			for i, p := range f.Params {
				ps[i] = p.Decl
			}
			sig, err := rustSig(f.Ret, "("+strings.Join(ps, ", ")+")")
			if err != nil {
				return fmt.Errorf("%s: %v", f.Name, err)
			}
			fmt.Fprintf(b, "    pub fn %s%s;\n", f.Name, sig)
		}
		b.WriteString("}\n")
	}
	b.WriteString("\n")
	return nil
}

// derivesDefault: every field numeric, an optional function or such a struct.
func (a *API) derivesDefault(s *Struct) bool {
	for _, f := range s.Fields {
		rt, err := rustType(f.Type)
		if err != nil {
			return false
		}
		if f.Len != "" && numeric(rt) {
			continue
		}
		if !numeric(rt) && !strings.HasPrefix(rt, "Option<") {
			if o := a.structs[rt]; o == nil || o.Opaque || !a.derivesDefault(o) {
				return false
			}
		}
	}
	return true
}

// covered returns the structs (with a body), typedefs and constants of RustHeaders.
func (a *API) covered() (structs []*Struct, typedefs []*Typedef, consts []*Const, funcs []Func) {
	for _, h := range a.Headers {
		if !contains(RustHeaders, h.Name) {
			continue
		}
		for i := range h.Structs {
			if !h.Structs[i].Opaque {
				structs = append(structs, &h.Structs[i])
			}
		}
		for i := range h.Typedefs {
			if !strings.Contains(h.Typedefs[i].Type, "(*)") {
				typedefs = append(typedefs, &h.Typedefs[i])
			}
		}
		for i := range h.Consts {
			consts = append(consts, &h.Consts[i])
		}
		funcs = append(funcs, h.Funcs...)
	}
	return
}

// GenerateProbe writes probe.c: size, alignment and field offsets of every struct, the size of
// every value typedef, and every constant, as build.rs runs it and tests/layout.rs reads it.
func (a *API) GenerateProbe() []byte {
	var b bytes.Buffer
	b.WriteString("/* " + Generated + "\n" +
		" * Layout probe, compiled and run by build.rs against abi/: prints the size, alignment and\n" +
		" * every field offset of each struct chutney-sys declares, and the value of every constant;\n" +
		" * tests/layout.rs compares each line with the Rust declarations. */\n")
	for _, h := range RustHeaders {
		fmt.Fprintf(&b, "#include <chutney/%s>\n", h)
	}
	b.WriteString("#include <stdalign.h>\n#include <stddef.h>\n#include <stdio.h>\n\n" +
		"#define S(t) printf(\"size %s %zu\\nalign %s %zu\\n\", #t, sizeof(t), #t, (size_t)alignof(t))\n" +
		"#define F(t, f) printf(\"offset %s.%s %zu\\n\", #t, #f, offsetof(t, f))\n" +
		"#define K(c) printf(\"const %s %lld\\n\", #c, (long long)(c))\n" +
		"#define STR(c) printf(\"string %s %s\\n\", #c, c)\n\nint main(void) {\n")
	structs, typedefs, consts, _ := a.covered()
	for _, s := range structs {
		fmt.Fprintf(&b, "  S(%s);\n", s.Name)
		for _, f := range s.Fields {
			fmt.Fprintf(&b, "  F(%s, %s);\n", s.Name, f.Name)
		}
	}
	for _, t := range typedefs {
		fmt.Fprintf(&b, "  S(%s);\n", t.Name)
	}
	for _, c := range consts {
		if c.Str {
			fmt.Fprintf(&b, "  STR(%s);\n", c.Name)
		} else {
			fmt.Fprintf(&b, "  K(%s);\n", c.Name)
		}
	}
	b.WriteString("  return 0;\n}\n")
	return b.Bytes()
}

// Generated is the first line of every file genabi writes (after the comment marker).
const Generated = "Code generated by bindings/go/internal/genabi from the headers of abi/chutney; DO NOT EDIT."

// rustTest is a generated integration test of chutney-sys: doc lines, then body.
func rustTest(doc, body string) []byte {
	return []byte("// " + Generated + "\n//! " + strings.ReplaceAll(doc, "\n", "\n//! ") + "\n" + body)
}

// GenerateLayoutTest writes tests/layout.rs: the Rust side of every probe line.
func (a *API) GenerateLayoutTest() []byte {
	structs, typedefs, consts, _ := a.covered()
	var lines, strs []string
	for _, s := range structs {
		var fs []string
		for _, f := range s.Fields {
			if r := RustName(f.Name); r != f.Name {
				fs = append(fs, r+" = "+f.Name)
			} else {
				fs = append(fs, f.Name)
			}
		}
		lines = append(lines, s.Name+" { "+strings.Join(fs, ", ")+" }")
	}
	for _, t := range typedefs {
		lines = append(lines, t.Name+" {}")
	}
	var ks []string
	for _, c := range consts {
		if c.Str {
			strs = append(strs, c.Name)
		} else {
			ks = append(ks, c.Name)
		}
	}
	return rustTest("Compares the Rust declarations with the C probe (build.rs): size, alignment and every\n"+
		"field offset of every struct, the size of every value typedef, every constant.",
		"mod common;\n\nuse chutney_sys::*;\n\nfn rust_lines() -> Vec<String> {\n    let mut v = Vec::new();\n"+
			"    layout! { v;\n        "+strings.Join(lines, "\n        ")+"\n    }\n"+
			"    consts! { v;\n        "+strings.Join(ks, "\n        ")+"\n    }\n"+
			"    strings! { v; "+strings.Join(strs, " ")+" }\n    v\n}\n\n"+
			"#[test]\nfn rust_layout_and_constants_match_the_c_probe() {\n"+
			"    common::assert_same_as_probe(rust_lines());\n}\n")
}

// GenerateSymbolsTest writes tests/symbols.rs: every declared function is linked.
func (a *API) GenerateSymbolsTest() []byte {
	_, _, _, funcs := a.covered()
	var rows []string
	for _, n := range Names(funcs) {
		rows = append(rows, fmt.Sprintf("(%q, %s as *const () as usize),", n, n))
	}
	return rustTest("Every function declared in chutney-sys resolves in the real libchutney (the test binary\n"+
		"links each one).",
		"use chutney_sys::*;\n\n#[test]\nfn every_declared_function_links() {\n    let addrs: &[(&str, usize)] = &[\n        "+
			strings.Join(rows, "\n        ")+"\n    ];\n"+
			"    for (name, addr) in addrs {\n        assert_ne!(*addr, 0, \"{name} has no address\");\n    }\n}\n")
}
