//go:build !chutney_no_pkgconfig

package chutney

// The library is found with pkg-config (an installed chutney.pc, or the build tree's
// meson-uninstalled/chutney-uninstalled.pc through PKG_CONFIG_PATH: see env.sh). Build with
// -tags chutney_no_pkgconfig to take every flag from CGO_CFLAGS / CGO_LDFLAGS instead.

/*
#cgo pkg-config: chutney
*/
import "C"
