//go:build !race

package chutney_test

const raceEnabled = false
