// Package words writes counts as a person reads them.
package words

import "fmt"

// Count is "1 error", "2 errors", "0 errors": n and noun, plural unless n
// is 1 (nouns whose plural adds an s).
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
