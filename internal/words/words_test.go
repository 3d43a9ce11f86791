package words

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCount(t *testing.T) {
	assert.Equal(t, "0 differences", Count(0, "difference"))
	assert.Equal(t, "1 difference", Count(1, "difference"))
	assert.Equal(t, "2 differences", Count(2, "difference"))
}
