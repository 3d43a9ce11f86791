package coupon

// Acting is who an audit row records and for whom: named is the person a
// request names (a body's operator or changed_by, validated), identity
// the name of the token that sent it ("" on an API without tokens, or
// from the command line). With an identity, the row records it (by) and
// the named person beside it (onBehalfOf), unless they are the same;
// without one, the named person as the caller says.
func Acting(named, identity string) (by, onBehalfOf string) {
	if identity == "" {
		return named, ""
	}
	if named == identity {
		return identity, ""
	}
	return identity, named
}
