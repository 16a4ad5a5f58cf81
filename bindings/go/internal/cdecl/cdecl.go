// Package cdecl reads the CTN_API declarations of chutney's public headers and writes the C
// wrappers the Go package calls. It is used by the generator (internal/genabi) and by the
// package's tests (wrappers up to date, every application-facing function bound).
package cdecl

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// AppHeaders are the headers an application uses (the plugin-side headers declare no CTN_API
// functions: plugins never link libchutney).
var AppHeaders = []string{"chutney.h", "nn.h", "data.h", "checkpoint.h", "onnx.h"}

// Param is one parameter of a declaration.
type Param struct {
	Type string // "const int64_t *"; for a function pointer, the declaration without the name
	Name string // "shape"
	Decl string // the whole parameter as written (normalised spaces)
}

// Func is one CTN_API function.
type Func struct {
	Header string // "chutney.h"
	Ret    string // "ctn_status", "void", "const char *"
	Name   string // "ctn_tensor_create"
	Params []Param
}

// ReturnsStatus tells whether the function reports failure through a ctn_status (and so gets a
// wrapper that copies ctn_last_error() in the same C call).
func (f Func) ReturnsStatus() bool { return f.Ret == "ctn_status" }

var (
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	space        = regexp.MustCompile(`\s+`)
	declRe       = regexp.MustCompile(`^CTN_API (.*?)\b(ctn_[a-z0-9_]+) ?\((.*)\)$`)
	paramRe      = regexp.MustCompile(`^(.*?)\b([A-Za-z_][A-Za-z0-9_]*)$`)
	// A function-pointer parameter: "ret (*name)(params)".
	funcParamRe = regexp.MustCompile(`^([^()]*)\(\s*\*\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*(\(.*\))$`)
)

// Parse returns the CTN_API function declarations of one header's text, in order.
func Parse(header, src string) ([]Func, error) {
	src = blockComment.ReplaceAllString(src, " ")
	src = lineComment.ReplaceAllString(src, " ")
	var out []Func
	for {
		i := strings.Index(src, "CTN_API ")
		if i < 0 {
			return out, nil
		}
		// The macro's own definition (#define CTN_API ...) is not a declaration.
		lineStart := strings.LastIndex(src[:i], "\n") + 1
		if strings.HasPrefix(strings.TrimSpace(src[lineStart:i]), "#") {
			src = src[i+len("CTN_API "):]
			continue
		}
		j := strings.Index(src[i:], ";")
		if j < 0 {
			return nil, fmt.Errorf("%s: unterminated CTN_API declaration", header)
		}
		decl := strings.TrimSpace(space.ReplaceAllString(src[i:i+j], " "))
		src = src[i+j:]
		decl = strings.ReplaceAll(decl, "( ", "(")
		decl = strings.ReplaceAll(decl, " )", ")")
		m := declRe.FindStringSubmatch(decl)
		// A return type is required and may not be a function pointer: anything this parser
		// does not understand fails here rather than producing a wrong wrapper.
		if m == nil || strings.TrimSpace(m[1]) == "" || strings.ContainsAny(m[1], "()") {
			return nil, fmt.Errorf("%s: cannot parse %q", header, decl)
		}
		f := Func{Header: header, Ret: strings.TrimSpace(m[1]), Name: m[2]}
		if args := strings.TrimSpace(m[3]); args != "void" && args != "" {
			parts, ok := splitTop(args)
			if !ok {
				return nil, fmt.Errorf("%s: %s: unbalanced parentheses in %q", header, f.Name, args)
			}
			for _, a := range parts {
				p, err := parseParam(strings.TrimSpace(a))
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %v", header, f.Name, err)
				}
				f.Params = append(f.Params, p)
			}
		}
		out = append(out, f)
	}
}

// splitTop splits a parameter list at the commas outside parentheses.
func splitTop(s string) ([]string, bool) {
	parts, rest, ok := splitOutside(s, '(', ')', ',', nil)
	return append(parts, rest), ok
}

// splitOutside splits s at each sep outside open/close pairs and returns the text after the
// last one; ok is false when the pairs do not balance. When drop says yes to the text before a
// block that closes at the top level (a `static inline` function, whose body no separator
// ends), that text and the block are dropped.
func splitOutside(s string, open, close, sep rune, drop func(head string) bool) (parts []string, rest string, ok bool) {
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case open:
			depth++
		case close:
			if depth--; depth < 0 {
				return nil, "", false
			}
			if depth == 0 && drop != nil && drop(strings.TrimSpace(s[start:i])) {
				start = i + 1
			}
		case sep:
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return parts, s[start:], depth == 0
}

func parseParam(a string) (Param, error) {
	if fm := funcParamRe.FindStringSubmatch(a); fm != nil {
		return Param{Type: strings.TrimSpace(fm[1]) + " (*)" + fm[3], Name: fm[2], Decl: a}, nil
	}
	pm := paramRe.FindStringSubmatch(a)
	if pm == nil || strings.TrimSpace(pm[1]) == "" || strings.ContainsAny(a, "()") {
		return Param{}, fmt.Errorf("cannot parse parameter %q", a)
	}
	return Param{Type: strings.TrimSpace(pm[1]), Name: pm[2], Decl: a}, nil
}

// ParseDir parses AppHeaders in dir (the folder holding chutney.h).
func ParseDir(dir string) ([]Func, error) {
	hs, err := ParseHeaders(dir, AppHeaders)
	if err != nil {
		return nil, err
	}
	var all []Func
	for _, h := range hs {
		all = append(all, h.Funcs...)
	}
	return all, nil
}

// WrapperName is the name of the C wrapper of a status-returning function: ctn_add -> goctn_add.
func WrapperName(fn string) string { return "go" + fn }

// Generate writes the C header of wrappers: for every status-returning function one static
// inline function with the same parameters that calls it and, on failure, copies the message of
// ctn_last_error() before returning (see shim.h: goctn_result).
func Generate(funcs []Func) []byte {
	var b bytes.Buffer
	b.WriteString("/* Code generated by internal/genabi from abi/chutney/{" +
		strings.Join(AppHeaders, ",") + "}; DO NOT EDIT.\n" +
		" *\n * One wrapper per CTN_API function that returns a ctn_status: it calls the function and,\n" +
		" * when it fails, copies ctn_last_error() in the same C call (so on the same OS thread),\n" +
		" * because a goroutine may move to another thread between two cgo calls. */\n")
	b.WriteString("#ifndef CHUTNEY_GO_WRAP_H\n#define CHUTNEY_GO_WRAP_H\n\n")
	header := ""
	for _, f := range funcs {
		if !f.ReturnsStatus() {
			continue
		}
		if f.Header != header {
			header = f.Header
			fmt.Fprintf(&b, "/* ---- %s ---- */\n", header)
		}
		var params, args []string
		for _, p := range f.Params {
			params = append(params, p.Decl)
			args = append(args, p.Name)
		}
		if len(params) == 0 {
			params = []string{"void"}
		}
		fmt.Fprintf(&b, "static inline goctn_ret %s(%s) {\n  return goctn_result(%s(%s));\n}\n",
			WrapperName(f.Name), strings.Join(params, ", "), f.Name, strings.Join(args, ", "))
	}
	b.WriteString("\n#endif /* CHUTNEY_GO_WRAP_H */\n")
	return b.Bytes()
}

// Names returns the sorted function names.
func Names(funcs []Func) []string {
	var n []string
	for _, f := range funcs {
		n = append(n, f.Name)
	}
	sort.Strings(n)
	return n
}
