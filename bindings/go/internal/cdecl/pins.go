package cdecl

import (
	"bytes"
	"fmt"
	"strings"
)

// Model is a C data model: pointer size and the alignment of 64-bit integers and doubles.
type Model struct {
	Name   string
	Cond   string // the preprocessor condition selecting it
	Ptr    int
	Align8 int
}

// Models are the targets the layout pins are written for, first match wins.
var Models = []Model{
	{"LP64", "UINTPTR_MAX == 0xffffffffffffffffu", 8, 8},
	{"ILP32, 64-bit values 4-aligned (i386)", "UINTPTR_MAX == 0xffffffffu && (defined(__i386__) || defined(_M_IX86))", 4, 4},
	{"ILP32, 64-bit values 8-aligned (armhf)", "UINTPTR_MAX == 0xffffffffu", 4, 8},
}

var primSize = map[string]int{"int8_t": 1, "uint8_t": 1, "char": 1, "int16_t": 2,
	"uint16_t": 2, "int32_t": 4, "uint32_t": 4, "int": 4, "unsigned": 4, "float": 4,
	"int64_t": 8, "uint64_t": 8, "double": 8}

// sizeAlign of a C type under model m.
func (a *API) sizeAlign(t string, m Model) (int, int, error) {
	t = strings.TrimSpace(strings.ReplaceAll(" "+t+" ", " const ", " "))
	t = strings.TrimSpace(strings.ReplaceAll(" "+t+" ", " struct ", " "))
	if strings.Contains(t, "*") || t == "size_t" {
		return m.Ptr, m.Ptr, nil
	}
	if n, ok := primSize[t]; ok {
		if n == 8 {
			return 8, m.Align8, nil
		}
		return n, n, nil
	}
	if td := a.typedefs[t]; td != nil {
		if td.Type == "enum" {
			return 4, 4, nil
		}
		return a.sizeAlign(td.Type, m)
	}
	if s := a.structs[t]; s != nil && !s.Opaque {
		l, err := a.layout(s, m)
		if err != nil {
			return 0, 0, err
		}
		return l.size, l.align, nil
	}
	return 0, 0, fmt.Errorf("no size known for C type %q", t)
}

type layout struct {
	offsets     []int
	size, align int
}

func alignUp(x, a int) int { return (x + a - 1) / a * a }

// layout of struct s under model m, by the C rules: each field at the next multiple of its
// alignment, the size a multiple of the largest alignment.
func (a *API) layout(s *Struct, m Model) (layout, error) {
	l := layout{align: 1}
	off := 0
	for _, f := range s.Fields {
		size, al, err := a.sizeAlign(f.Type, m)
		if err != nil {
			return l, fmt.Errorf("%s.%s: %v", s.Name, f.Name, err)
		}
		if f.Len != "" {
			c := a.consts[f.Len]
			if c == nil || !c.Known {
				return l, fmt.Errorf("%s.%s: array length %s is not a known constant", s.Name, f.Name, f.Len)
			}
			size *= int(c.Value)
		}
		off = alignUp(off, al)
		l.offsets = append(l.offsets, off)
		off += size
		if al > l.align {
			l.align = al
		}
	}
	l.size = alignUp(off, l.align)
	return l, nil
}

// GeneratePins writes core/capi/abi_layout_gen.h: the value of every integer constant and, per
// data model, the offset of every field and the size and alignment of every struct of the
// headers, as static assertions (the macros come from abi_layout.h, which includes this file).
func (a *API) GeneratePins() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("/* " + Generated + "\n" +
		" * Regenerate: cd bindings/go && GOPROXY=off go generate ./chutney\n" +
		" * The layout of every public struct and the value of every integer constant, pinned: a\n" +
		" * header change that moves a field or changes a value fails the build until this file is\n" +
		" * regenerated, and the regenerated diff shows what moved (docs/ABI.md). Included by\n" +
		" * abi_layout.h, which defines the PIN macros. */\n\n")
	for _, h := range a.Headers {
		for _, c := range h.Consts {
			if !c.Known {
				continue
			}
			suffix := ""
			if strings.Contains(strings.ToLower(c.Expr), "u") && c.Enum == "" {
				suffix = "u"
			}
			fmt.Fprintf(&b, "CTN_PIN_ASSERT(%s == %d%s, \"%s: %s changed\");\n", c.Name, c.Value, suffix, h.Name, c.Name)
		}
	}
	// One selector macro: CTN_PIN_AT(n0, n1, ...) is the number of the model this target has.
	var params []string
	for i := range Models {
		params = append(params, fmt.Sprintf("m%d", i))
	}
	for i, m := range Models {
		kw := "#elif"
		if i == 0 {
			kw = "#if"
		}
		fmt.Fprintf(&b, "\n%s %s /* %s */\n", kw, m.Cond, m.Name)
		fmt.Fprintf(&b, "#define CTN_PIN_AT(%s) (m%d)\n", strings.Join(params, ", "), i)
		fmt.Fprintf(&b, "CTN_PIN_ASSERT(sizeof(void *) == %d, \"the %s pins need %d-byte pointers\");\n", m.Ptr, m.Name, m.Ptr)
	}
	b.WriteString("#else\n#error \"abi_layout_gen.h: no data model for this target: add one to Models in " +
		"bindings/go/internal/cdecl/pins.go and regenerate\"\n#endif\n\n")
	at := func(vals []int) string {
		var s []string
		for _, v := range vals {
			s = append(s, fmt.Sprint(v))
		}
		return "CTN_PIN_AT(" + strings.Join(s, ", ") + ")"
	}
	for _, h := range a.Headers {
		for i := range h.Structs {
			s := &h.Structs[i]
			if s.Opaque {
				continue
			}
			ls := make([]layout, len(Models))
			for k, m := range Models {
				l, err := a.layout(s, m)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", h.Name, err)
				}
				ls[k] = l
			}
			pick := func(f func(l layout) int) string {
				var v []int
				for _, l := range ls {
					v = append(v, f(l))
				}
				return at(v)
			}
			for j, f := range s.Fields {
				fmt.Fprintf(&b, "PIN(%s, %s, %s);\n", s.Name, f.Name, pick(func(l layout) int { return l.offsets[j] }))
			}
			fmt.Fprintf(&b, "PIN_SIZE(%s, %s);\nPIN_ALIGN(%s, %s);\n", s.Name,
				pick(func(l layout) int { return l.size }), s.Name, pick(func(l layout) int { return l.align }))
		}
	}
	b.WriteString("#undef CTN_PIN_AT\n")
	return b.Bytes(), nil
}
