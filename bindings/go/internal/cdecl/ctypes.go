package cdecl

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Const is a #define of a value or an enum member.
type Const struct {
	Name  string
	Expr  string // the C value as written, comments and spaces normalised: "1u", "(64ull << 20)"
	Enum  string // the typedef of the enum ("ctn_dtype"), "" for an anonymous enum or a #define
	Str   bool   // a string literal
	Value int64  // for integer literals (Known)
	Known bool
}

// Field is one member of a struct: Type is the C type ("const char *"; a function pointer is
// "ret (*)(params)"), Len the array length expression ("" when not an array).
type Field struct {
	Name, Type, Len string
}

// Struct is a typedef'd struct; Opaque when it has no body.
type Struct struct {
	Name   string
	Fields []Field
	Opaque bool
}

// Typedef is "typedef T name;" (Type "int32_t") or a function pointer typedef (Type "ret (*)(params)").
type Typedef struct {
	Name, Type string
}

// Header is everything one public header declares, in order of appearance per kind.
type Header struct {
	Name     string
	Consts   []Const
	Typedefs []Typedef
	Structs  []Struct
	Funcs    []Func
}

var (
	defineRe    = regexp.MustCompile(`^#\s*define\s+([A-Z][A-Z0-9_]*)(\s+(.*))?$`)
	intLitRe    = regexp.MustCompile(`^\(?\s*(?:\(\s*[a-z_0-9]+\s*\)\s*)?(0x[0-9a-fA-F]+|[0-9]+)([uUlL]*)\s*\)?$`)
	typedefRe   = regexp.MustCompile(`^typedef (.+?) ?\b([A-Za-z_][A-Za-z0-9_]*)$`)
	structRe    = regexp.MustCompile(`^typedef struct ?([A-Za-z_][A-Za-z0-9_]*)? ?\{(.*)\} ?([A-Za-z_][A-Za-z0-9_]*)$`)
	opaqueRe    = regexp.MustCompile(`^typedef struct ([A-Za-z_][A-Za-z0-9_]*) ([A-Za-z_][A-Za-z0-9_]*)$`)
	enumRe      = regexp.MustCompile(`^(?:typedef )?enum ?([A-Za-z_][A-Za-z0-9_]*)? ?\{(.*)\} ?([A-Za-z_][A-Za-z0-9_]*)?$`)
	fnTypeRe    = regexp.MustCompile(`^typedef (.+?) ?\( ?\* ?([A-Za-z_][A-Za-z0-9_]*) ?\) ?(\(.*\))$`)
	arrayRe     = regexp.MustCompile(`^(.*?)\[([^\]]+)\]$`)
	externCRe   = regexp.MustCompile(`extern "C" \{`)
	ppSkipRe    = regexp.MustCompile(`^\s*#`)
	fwdRe       = regexp.MustCompile(`^struct [A-Za-z_][A-Za-z0-9_]*$`)
	closeOnlyRe = regexp.MustCompile(`(?m)^\s*\}\s*$`)
)

// ParseHeader reads the constants, typedefs, structs and CTN_API functions of one header.
// Function-like macros, include guards and `static inline` helpers are not part of it; any other
// statement the parser does not know is an error naming it.
func ParseHeader(name, src string) (*Header, error) {
	h := &Header{Name: name}
	funcs, err := Parse(name, src)
	if err != nil {
		return nil, err
	}
	h.Funcs = funcs
	src = blockComment.ReplaceAllString(src, " ")
	src = lineComment.ReplaceAllString(src, " ")
	src = strings.ReplaceAll(src, "\\\n", " ")
	var code []string
	for _, line := range strings.Split(src, "\n") {
		if !ppSkipRe.MatchString(line) {
			code = append(code, line)
			continue
		}
		m := defineRe.FindStringSubmatch(strings.TrimSpace(space.ReplaceAllString(line, " ")))
		if m == nil || !strings.HasPrefix(m[1], "CTN_") || m[3] == "" ||
			strings.HasPrefix(m[3], "CTN_EXPORT") || strings.Contains(m[3], "__") ||
			strings.HasPrefix(m[3], "extern") {
			continue // guards, function-like macros, export macros
		}
		c := Const{Name: m[1], Expr: strings.TrimSpace(m[3])}
		if strings.HasPrefix(c.Expr, "\"") {
			c.Str = true
		} else if lm := intLitRe.FindStringSubmatch(c.Expr); lm != nil {
			c.Value, c.Known = parseInt(lm[1])
		}
		h.Consts = append(h.Consts, c)
	}
	text := externCRe.ReplaceAllString(strings.Join(code, "\n"), " ")
	text = closeOnlyRe.ReplaceAllString(text, " ")
	for _, st := range statements(text) {
		if err := h.statement(st); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	return h, nil
}

func parseInt(s string) (int64, bool) {
	v, err := strconv.ParseUint(s, 0, 64)
	return int64(v), err == nil
}

// statements splits at the semicolons outside braces; a `static inline` function (a body
// without a closing semicolon) is dropped with its body.
func statements(text string) []string {
	parts, _, _ := splitOutside(text, '{', '}', ';', func(head string) bool {
		return strings.HasPrefix(head, "static inline")
	})
	for i := range parts {
		parts[i] = norm(parts[i])
	}
	return parts
}

func norm(s string) string {
	s = strings.TrimSpace(space.ReplaceAllString(s, " "))
	s = strings.ReplaceAll(s, "( ", "(")
	return strings.ReplaceAll(s, " )", ")")
}

func (h *Header) statement(st string) error {
	switch {
	case st == "" || strings.HasPrefix(st, "CTN_API ") || fwdRe.MatchString(st):
		return nil // functions are read by Parse; "struct ctn_host_api" is a forward declaration
	case structRe.MatchString(st):
		m := structRe.FindStringSubmatch(st)
		if m[1] != "" && m[1] != m[3] {
			return fmt.Errorf("struct %s is typedef'd as %s", m[1], m[3])
		}
		s := Struct{Name: m[3]}
		for _, decl := range strings.Split(m[2], ";") {
			if decl = strings.TrimSpace(decl); decl == "" {
				continue
			}
			fs, err := parseFields(decl)
			if err != nil {
				return fmt.Errorf("struct %s: %v", s.Name, err)
			}
			s.Fields = append(s.Fields, fs...)
		}
		h.Structs = append(h.Structs, s)
	case opaqueRe.MatchString(st):
		m := opaqueRe.FindStringSubmatch(st)
		h.Structs = append(h.Structs, Struct{Name: m[2], Opaque: true})
	case enumRe.MatchString(st):
		m := enumRe.FindStringSubmatch(st)
		next := int64(0)
		for _, e := range strings.Split(m[2], ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			c := Const{Name: e, Enum: m[3]}
			if i := strings.Index(e, "="); i >= 0 {
				c.Name, c.Expr = strings.TrimSpace(e[:i]), strings.TrimSpace(e[i+1:])
				v, ok := parseInt(strings.TrimRight(c.Expr, "uUlL"))
				if !ok {
					return fmt.Errorf("enum member %s: cannot read value %q", c.Name, c.Expr)
				}
				next = v
			}
			c.Value, c.Known = next, true
			c.Expr = strconv.FormatInt(next, 10)
			next++
			h.Consts = append(h.Consts, c)
		}
		if m[3] != "" {
			h.Typedefs = append(h.Typedefs, Typedef{Name: m[3], Type: "enum"})
		}
	case fnTypeRe.MatchString(st):
		m := fnTypeRe.FindStringSubmatch(st)
		h.Typedefs = append(h.Typedefs, Typedef{Name: m[2], Type: m[1] + " (*)" + m[3]})
	case typedefRe.MatchString(st) && !strings.ContainsAny(st, "{("):
		m := typedefRe.FindStringSubmatch(st)
		h.Typedefs = append(h.Typedefs, Typedef{Name: m[2], Type: m[1]})
	default:
		return fmt.Errorf("cannot parse %q", st)
	}
	return nil
}

// parseFields reads "T a", "T a[N]", "T a, b" and "ret (*f)(params)".
func parseFields(decl string) ([]Field, error) {
	if fm := funcParamRe.FindStringSubmatch(decl); fm != nil {
		return []Field{{Name: fm[2], Type: strings.TrimSpace(fm[1]) + " (*)" + fm[3]}}, nil
	}
	parts := strings.Split(decl, ",")
	first, err := parseParam(strings.TrimSpace(parts[0]))
	var out []Field
	add := func(p Param, base string) error {
		f := Field{Name: p.Name, Type: base}
		if am := arrayRe.FindStringSubmatch(p.Name); am != nil {
			f.Name, f.Len = strings.TrimSpace(am[1]), strings.TrimSpace(am[2])
		}
		out = append(out, f)
		return nil
	}
	// Arrays: "int64_t shape[CTN_MAX_DIMS]" fails parseParam's identifier rule; split by hand.
	if err != nil || strings.Contains(parts[0], "[") {
		am := arrayRe.FindStringSubmatch(strings.TrimSpace(parts[0]))
		if am == nil || len(parts) > 1 {
			return nil, fmt.Errorf("cannot parse field %q", decl)
		}
		p, err := parseParam(strings.TrimSpace(am[1]))
		if err != nil {
			return nil, err
		}
		return []Field{{Name: p.Name, Type: p.Type, Len: strings.TrimSpace(am[2])}}, nil
	}
	base := strings.TrimRight(first.Type, " *")
	_ = add(first, first.Type)
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		stars := strings.Count(p, "*")
		name := strings.TrimSpace(strings.Trim(p, "* "))
		t := base
		if stars > 0 {
			t = base + " " + strings.Repeat("*", stars)
		}
		_ = add(Param{Name: name}, t)
	}
	return out, nil
}

// ParseHeaders parses the named headers of dir in order.
func ParseHeaders(dir string, names []string) ([]*Header, error) {
	var out []*Header
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		h, err := ParseHeader(n, string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}
