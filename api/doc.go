// Package api is the wire of couponlink's HTTP API: the request and
// answer bodies of its routes and its error codes, as openapi.json (in
// coupon/httpapi) describes them. The server (coupon/httpapi and the
// packages whose values it answers) and the Go client (package client)
// both use these types, so the two cannot drift apart.
//
// It imports the standard library only: a program that uses the client
// does not link the server's MySQL, Redis or metrics packages.
package api
