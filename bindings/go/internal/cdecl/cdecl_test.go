package cdecl

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := `
#define CTN_API CTN_EXPORT
/* CTN_API in a comment is not a declaration */
CTN_API uint32_t ctn_abi_version(void);
// CTN_API ctn_status ctn_commented_out(int x);
CTN_API ctn_status ctn_plan_run(ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes,
                                const ctn_tensor *const *feed_values, uint32_t n_outputs,
                                ctn_tensor *const *outputs);
CTN_API const char *ctn_version_string(void);
`
	fs, err := Parse("x.h", src)
	if err != nil {
		t.Fatal(err)
	}
	if got := Names(fs); !reflect.DeepEqual(got, []string{"ctn_abi_version", "ctn_plan_run", "ctn_version_string"}) {
		t.Fatalf("names %v", got)
	}
	run := fs[1]
	want := []Param{{"ctn_plan *", "p"}, {"uint32_t", "n_feeds"}, {"const ctn_node *", "feed_nodes"},
		{"const ctn_tensor *const *", "feed_values"}, {"uint32_t", "n_outputs"}, {"ctn_tensor *const *", "outputs"}}
	if run.Ret != "ctn_status" || !reflect.DeepEqual(run.Params, want) {
		t.Fatalf("ctn_plan_run parsed as %+v", run)
	}
	if fs[2].Ret != "const char *" || fs[0].Params != nil {
		t.Fatalf("%+v %+v", fs[0], fs[2])
	}
	gen := string(Generate(fs))
	if !strings.Contains(gen, "static inline goctn_ret goctn_plan_run(ctn_plan *p, uint32_t n_feeds, const ctn_node *feed_nodes, const ctn_tensor *const *feed_values, uint32_t n_outputs, ctn_tensor *const *outputs) {\n  return goctn_result(ctn_plan_run(p, n_feeds, feed_nodes, feed_values, n_outputs, outputs));") {
		t.Fatalf("generated:\n%s", gen)
	}
	if strings.Contains(gen, "goctn_abi_version") {
		t.Fatal("a function that returns no status got a wrapper")
	}
	if _, err := Parse("bad.h", "CTN_API ctn_status (*weird)(void);"); err == nil {
		t.Fatal("an unparsable declaration was accepted")
	}
}
