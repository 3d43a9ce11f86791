package sqltx_test

import (
	"testing"
	"unicode/utf8"

	"github.com/couponlink/couponlink/internal/sqltx"
)

// A summary or note cut to its column's size stays valid UTF-8 (MariaDB
// refuses half a character in a utf8mb4 column, and the task would not be
// recorded).
func TestClipKeepsCharacters(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"a−b", 2, "a"}, // "−" is 3 bytes: not cut in half
		{"a−b", 4, "a−"},
		{"−−", 1, ""},
	} {
		got := sqltx.Clip(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
