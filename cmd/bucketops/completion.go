package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bucketops/bucketops/store"
)

// appCommands take an app (or APP@GENERATION) as their first argument,
// which the shell completion completes from the bucket.
var appCommands = map[string]bool{
	"push": true, "log": true, "show": true, "diff": true, "promote": true, "rollback": true,
	"retire": true, "wait": true, "verify": true,
}

// completionApps bounds what one completion lists.
const completionApps = 1000

// wireCompletion completes app names and gives the root --version and
// "did you mean" for a mistyped command.
func wireCompletion(e *env, root *cobra.Command) {
	root.Version = fmt.Sprintf("%s (%s)", version, runtime.Version())
	root.SetVersionTemplate("bucketops {{.Version}}\n")
	root.SuggestionsMinimumDistance = 2
	for _, cmd := range root.Commands() {
		if appCommands[cmd.Name()] && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 && cmd.Name() != "diff" && cmd.Name() != "promote" {
					return nil, cobra.ShellCompDirectiveDefault // push's DIR, say
				}
				return e.completeApps(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		}
	}
}

// completeApps lists the apps whose names start with toComplete, from the
// directory toComplete is in: the bucket's heads, at most completionApps,
// within a few seconds; nothing when the bucket can't be read (a
// completion never prints an error into the command line).
func (e *env) completeApps(ctx context.Context, toComplete string) []cobra.Completion {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, closeStore, err := e.openStore(ctx)
	if err != nil {
		return nil
	}
	defer closeStore()
	dir := ""
	if i := strings.LastIndex(toComplete, "/"); i > 0 {
		dir = toComplete[:i]
	}
	heads, _, err := s.ListPage(ctx, dir, store.ListOptions{Limit: completionApps})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, h := range heads {
		if strings.HasPrefix(h.App, toComplete) {
			out = append(out, cobra.CompletionWithDesc(h.App, h.Message))
		}
	}
	return out
}

// unknownCommand is the error for arguments no command matched: the
// closest commands, when some are close.
func unknownCommand(root *cobra.Command, arg string) error {
	msg := fmt.Sprintf("unknown command %q", arg)
	if s := root.SuggestionsFor(arg); len(s) > 0 {
		msg += ": did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s (bucketops --help lists every command)", msg)
}
