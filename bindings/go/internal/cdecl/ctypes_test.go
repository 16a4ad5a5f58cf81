package cdecl

import (
	"reflect"
	"strings"
	"testing"
)

const sample = `
#define CTN_N 4
#define CTN_FLAG 2u /* a flag */
#define CTN_NONE ((ctn_node)0xffffffffu)
#define CTN_NAME "abc"
#define CTN_F(x) (x)
typedef uint32_t ctn_node;
typedef enum ctn_kind { CTN_A = 1, CTN_B, CTN_C = 7 } ctn_kind;
typedef struct ctn_h ctn_h;
typedef ctn_status (*ctn_cb)(void *state, const ctn_node *const *in, ...);
typedef struct ctn_s {
  uint32_t size;
  const char *name;   /* trailing comment */
  double a, b;
  int64_t shape[CTN_N];
  void (*release)(void *state);
  uint16_t fn;
} ctn_s;
static inline int ctn_helper(int x) { return x; }
CTN_API ctn_status ctn_s_get(ctn_h *h, ctn_s *out);
`

func TestParseHeader(t *testing.T) {
	h, err := ParseHeader("x.h", sample)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range h.Consts {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, " "); got != "CTN_N CTN_FLAG CTN_NONE CTN_NAME CTN_A CTN_B CTN_C" {
		t.Fatalf("constants %q", got)
	}
	if c := h.Consts[5]; c.Value != 2 || c.Enum != "ctn_kind" {
		t.Fatalf("CTN_B: %+v", c)
	}
	if len(h.Structs) != 2 || !h.Structs[0].Opaque || h.Structs[1].Name != "ctn_s" {
		t.Fatalf("structs %+v", h.Structs)
	}
	f := h.Structs[1].Fields
	if len(f) != 7 || f[3].Name != "b" || f[3].Type != "double" || f[4].Len != "CTN_N" ||
		f[5].Type != "void (*)(void *state)" {
		t.Fatalf("fields %+v", f)
	}
	if len(h.Funcs) != 1 || h.Funcs[0].Name != "ctn_s_get" {
		t.Fatalf("funcs %+v", h.Funcs)
	}
}

func TestParseHeaderRejectsWhatItCannotRead(t *testing.T) {
	_, err := ParseHeader("bad.h", "typedef struct ctn_u { int x; } ctn_v;\n")
	if err == nil || !strings.Contains(err.Error(), "bad.h") || !strings.Contains(err.Error(), "ctn_u") {
		t.Fatalf("err %v", err)
	}
	_, err = ParseHeader("bad.h", "union ctn_w { int x; float y; };\n")
	if err == nil || !strings.Contains(err.Error(), "union ctn_w") {
		t.Fatalf("err %v", err)
	}
}

func TestRust(t *testing.T) {
	h, err := ParseHeader("x.h", sample)
	if err != nil {
		t.Fatal(err)
	}
	api := NewAPI([]*Header{h})
	for name, want := range map[string]string{"CTN_N": "usize", "CTN_FLAG": "u32",
		"CTN_NONE": "ctn_node", "CTN_NAME": "&[u8]", "CTN_A": "ctn_kind"} {
		if got := api.constTy[name]; got != want {
			t.Errorf("type of %s: %s, want %s", name, got, want)
		}
	}
	RustHeaders = append(RustHeaders, "x.h")
	defer func() { RustHeaders = RustHeaders[:len(RustHeaders)-1] }()
	src, err := api.GenerateRust()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pub const CTN_NONE: ctn_node = 0xffffffff;",
		`pub const CTN_NAME: &[u8] = b"abc\0";`,
		`pub type ctn_cb = Option<unsafe extern "C" fn(state: *mut c_void, in_: *const *const ctn_node, ...) -> ctn_status>;`,
		"pub shape: [i64; CTN_N],",
		`pub release: Option<unsafe extern "C" fn(state: *mut c_void)>,`,
		"pub fn_: u16,",
		"#[derive(Debug, Clone, Copy)]\npub struct ctn_s",
		"pub fn ctn_s_get(h: *mut ctn_h, out: *mut ctn_s) -> ctn_status;",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated Rust lacks %q:\n%s", want, src)
		}
	}
}

func TestLayout(t *testing.T) {
	h, err := ParseHeader("x.h", sample)
	if err != nil {
		t.Fatal(err)
	}
	api := NewAPI([]*Header{h})
	for _, c := range []struct {
		m           Model
		offsets     []int
		size, align int
	}{
		{Models[0], []int{0, 8, 16, 24, 32, 64, 72}, 80, 8}, // LP64
		{Models[1], []int{0, 4, 8, 16, 24, 56, 60}, 64, 4},  // i386
		{Models[2], []int{0, 4, 8, 16, 24, 56, 60}, 64, 8},  // armhf
	} {
		l, err := api.layout(&h.Structs[1], c.m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(l.offsets, c.offsets) || l.size != c.size || l.align != c.align {
			t.Errorf("%s: offsets %v size %d align %d, want %v %d %d", c.m.Name, l.offsets, l.size,
				l.align, c.offsets, c.size, c.align)
		}
	}
	pins, err := api.GeneratePins()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PIN(ctn_s, shape, CTN_PIN_AT(32, 24, 24));",
		"PIN_SIZE(ctn_s, CTN_PIN_AT(80, 64, 64));", "CTN_PIN_ASSERT(CTN_FLAG == 2u,"} {
		if !strings.Contains(string(pins), want) {
			t.Errorf("pins lack %q", want)
		}
	}
}
