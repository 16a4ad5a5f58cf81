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
CTN_API ctn_status ctn_context_add_oplib(
    ctn_context *ctx,
    const struct ctn_plugin_header *(*query)(uint32_t host_abi_version,
                                             const struct ctn_host_api *host));
`
	fs, err := Parse("x.h", src)
	if err != nil {
		t.Fatal(err)
	}
	if got := Names(fs); !reflect.DeepEqual(got, []string{"ctn_abi_version", "ctn_context_add_oplib", "ctn_plan_run", "ctn_version_string"}) {
		t.Fatalf("names %v", got)
	}
	run := fs[1]
	want := []Param{{"ctn_plan *", "p", "ctn_plan *p"}, {"uint32_t", "n_feeds", "uint32_t n_feeds"},
		{"const ctn_node *", "feed_nodes", "const ctn_node *feed_nodes"},
		{"const ctn_tensor *const *", "feed_values", "const ctn_tensor *const *feed_values"},
		{"uint32_t", "n_outputs", "uint32_t n_outputs"}, {"ctn_tensor *const *", "outputs", "ctn_tensor *const *outputs"}}
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
	add := fs[3]
	if len(add.Params) != 2 || add.Params[1].Name != "query" ||
		add.Params[1].Type != "const struct ctn_plugin_header * (*)(uint32_t host_abi_version, const struct ctn_host_api *host)" {
		t.Fatalf("function-pointer parameter parsed as %+v", add.Params)
	}
	if !strings.Contains(gen, "goctn_context_add_oplib(ctn_context *ctx, const struct ctn_plugin_header *(*query)(uint32_t host_abi_version, const struct ctn_host_api *host)) {\n  return goctn_result(ctn_context_add_oplib(ctx, query));") {
		t.Fatalf("generated:\n%s", gen)
	}
	if strings.Contains(gen, "goctn_abi_version") {
		t.Fatal("a function that returns no status got a wrapper")
	}
	for _, bad := range []string{"CTN_API ctn_status (*weird)(void);", "CTN_API ctn_status ctn_f(int (x);",
		"CTN_API ctn_status ctn_f(int);"} {
		if _, err := Parse("bad.h", bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
