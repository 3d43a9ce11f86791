package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/couponlink/couponlink/auth"
	"github.com/couponlink/couponlink/internal/settings"
)

// apiAuth is where the API's tokens come from (-token-file,
// COUPONLINK_API_TOKEN) and where it serves them: read at start and again
// on each SIGHUP, by the same rules.
type apiAuth struct {
	file     string
	envToken func() string
	addr     string
	insecure bool // -insecure-no-auth
	log      *slog.Logger
}

// load reads the tokens at start; it refuses to serve open by accident
// (mayServe) and warns when the API serves open.
func (a apiAuth) load() (*auth.Tokens, error) {
	tokens, warn, err := a.read()
	if err != nil {
		return nil, err
	}
	if warn != "" {
		a.log.Warn(warn, "addr", a.addr)
	}
	return tokens, nil
}

// reload reads the tokens again and swaps them in only when they load and
// may serve on the address; an error keeps the tokens in use.
func (a apiAuth) reload(tokens *auth.Tokens) error {
	next, warn, err := a.read()
	if err != nil {
		return err
	}
	if err := tokens.Replace(next); err != nil {
		return err
	}
	if warn != "" {
		a.log.Warn(warn, "addr", a.addr)
	}
	return nil
}

// read loads the tokens and asks mayServe whether the API may serve them.
func (a apiAuth) read() (*auth.Tokens, string, error) {
	tokens, err := auth.Load(a.file, a.envToken())
	if err != nil {
		return nil, "", err
	}
	warn, err := mayServe(tokens.Len(), a.addr, a.insecure)
	if err != nil {
		return nil, "", err
	}
	return tokens, warn, nil
}

// mayServe decides whether the API may serve with n tokens on addr, at
// start and on every reload: with any token it may; with none, only on a
// loopback address, or with -insecure-no-auth. warn is what an API that
// serves open logs.
func mayServe(n int, addr string, insecure bool) (warn string, err error) {
	switch {
	case n > 0:
		return "", nil
	case loopback(addr):
		return "the API serves without any token on a loopback address: every process on this host may call it, writes included; " +
			"to close it, give it a token file (-token-file, COUPONLINK_API_TOKEN_FILE; couponlink token new)", nil
	case insecure:
		return "INSECURE: the API serves without any token on an address that is not loopback (-insecure-no-auth): anyone who reaches it may write", nil
	}
	return "", fmt.Errorf("-addr %s is not a loopback address and the API has no token: anyone who reaches it could void coupons. "+
		"Set COUPONLINK_API_TOKEN_FILE (-token-file; couponlink token new) or COUPONLINK_API_TOKEN (-token), "+
		"or COUPONLINK_API_INSECURE_NO_AUTH=true (-insecure-no-auth) to serve open on purpose", addr)
}

// loopback says whether addr (host:port) listens on loopback only:
// 127.0.0.0/8, ::1 or localhost; an empty host listens everywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// reloadOnHUP reads the tokens again on each SIGHUP until ctx ends; a
// set that is refused (a file that does not load, with no token, that
// another user could change) keeps the tokens in use, and logs why.
func (a apiAuth) reloadOnHUP(ctx context.Context, tokens *auth.Tokens) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := a.reload(tokens); err != nil {
				a.log.Error("SIGHUP: the tokens were not reloaded; the ones in use stay", "tokens", tokens.Names(), "err", err)
				continue
			}
			a.log.Info("SIGHUP: tokens reloaded", "tokens", tokens.Names())
		}
	}
}

// runToken is `couponlink token new -name NAME -role ROLE`: a new random
// token, printed once, and its line for the token file.
func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprintln(stderr, "usage: couponlink token new -name NAME -role viewer|operator|admin")
		return errUsage
	}
	f := settings.New("token new", "Makes a new API token (32 random bytes) and prints it once, with its line for the token file (its SHA-256 digest: the file never holds the token).", stderr)
	name := f.String("name", "", "the token's name: the identity the audit trail records")
	role := f.String("role", "viewer", "its role: viewer, operator or admin")
	if err := f.Parse(args[1:]); err != nil {
		if errors.Is(err, settings.ErrUsage) {
			return errUsage
		}
		return err
	}
	r, err := auth.ParseRole(*role)
	if err != nil {
		return err
	}
	if *name == "" {
		return fmt.Errorf("-name is required: who the token is (the audit trail records it)")
	}
	if err := auth.CheckName(*name); err != nil {
		return fmt.Errorf("-name: %w", err)
	}
	tok := auth.NewToken()
	fmt.Fprintf(stdout, "token (give it to %s; it is not shown again):\n  %s\nline for the token file (COUPONLINK_API_TOKEN_FILE), then SIGHUP the api:\n  %s %s %s\n",
		*name, tok, *name, r, auth.Digest(tok))
	return nil
}
