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

// loadTokens reads the API's tokens (-token-file, COUPONLINK_API_TOKEN)
// and refuses to serve open by accident: an address that is not loopback
// with no token at all needs -insecure-no-auth, which starts with a
// warning.
func loadTokens(file, envToken, addr string, insecure bool, log *slog.Logger) (*auth.Tokens, error) {
	tokens, err := auth.Load(file, envToken)
	if err != nil {
		return nil, err
	}
	if tokens.Len() > 0 || loopback(addr) {
		return tokens, nil
	}
	if !insecure {
		return nil, fmt.Errorf("-addr %s is not a loopback address and the API has no token: anyone who reaches it could void coupons. "+
			"Set COUPONLINK_API_TOKEN_FILE (-token-file; couponlink token new) or COUPONLINK_API_TOKEN (-token), "+
			"or COUPONLINK_API_INSECURE_NO_AUTH=true (-insecure-no-auth) to serve open on purpose", addr)
	}
	log.Warn("INSECURE: the API serves without any token on an address that is not loopback (-insecure-no-auth): anyone who reaches it may write", "addr", addr)
	return tokens, nil
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

// reloadTokensOnHUP reads the tokens again on each SIGHUP until ctx ends;
// a file that does not load keeps the tokens in use (the error is logged).
func reloadTokensOnHUP(ctx context.Context, tokens *auth.Tokens, file string, envToken func() string, log *slog.Logger) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			if err := tokens.Reload(file, envToken()); err != nil {
				log.Error("SIGHUP: the tokens were not reloaded; the ones in use stay", "err", err)
				continue
			}
			log.Info("SIGHUP: tokens reloaded", "tokens", tokens.Names())
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
