package httpapi

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/couponlink/couponlink/api"
)

// The one-pass read accepts only bodies the two-pass read accepts, with
// the same values, and leaves dst zero when it refuses one (the two-pass
// read then answers).
func TestDecodeFlatAgreesWithTwoPass(t *testing.T) {
	bodies := []string{
		`{"template_id":1,"user_id":"u","channel":"c","request_id":"r"}`, ` {"template_id": 7, "user_id": "é\u00e9", "channel": "a b", "request_id": "r\"1"} `,
		`{"template_id":1e3}`, `{"template_id":-0}`, `{"template_id":1.0}`, `{"template_id":"1"}`, `{"template_id":null,"user_id":null}`,
		`{"template_id":9223372036854775808}`, `{"template_id":01}`, `{"user_id":"\u00e9\ud800"}`, `{"user_id":"a\u0000b"}`, "{\"user_id\":\"\xff\"}",
		`null`, `{}`, `[]`, `"x"`, ``, `{"user_id":"x"} {}`, `{"user_id":"x"}x`, `{"User_id":"x"}`, `{"USER_ID":"x"}`, `{"user_id":"x","user_id":"y"}`,
		`{"user_id":"x","extra":1}`, `{"user_id":["x"]}`, `{"template_id":true}`, `{"user_id":"x"`,
	}
	for _, b := range bodies {
		var fast, slow api.ClaimRequest
		ok := decodeFlat([]byte(b), &fast)
		err := decodeBody([]byte(b), &slow)
		if ok {
			assert.NoError(t, err, "the one-pass read accepted %s", b)
			assert.Equal(t, slow, fast, "values of %s", b)
		} else {
			assert.Equal(t, api.ClaimRequest{}, fast, "dst after the one-pass read refused %s", b)
		}
	}
	for _, b := range []string{`{"user_coupon_id":12,"order_id":"o-1"}`, `{"user_coupon_id":12,"order_id":"o-1","order_id":"o-2"}`} {
		var fast, slow api.RedeemRequest
		if decodeFlat([]byte(b), &fast) {
			assert.NoError(t, decodeBody([]byte(b), &slow))
			assert.Equal(t, slow, fast)
		}
	}
	// the usual bodies do take the one-pass read
	var c api.ClaimRequest
	assert.True(t, decodeFlat([]byte(bodies[0]), &c))
	var r api.RedeemRequest
	assert.True(t, decodeFlat([]byte(`{"user_coupon_id":12,"order_id":"o-1"}`), &r))
	// and a body that is not flat never does
	var nt api.NewTemplate
	assert.False(t, decodeFlat([]byte(`{"name":"n"}`), &nt))
}
