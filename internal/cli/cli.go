// Package cli holds the small pieces every linkgate command shares: the
// process environment handed to a subcommand, flag parsing with LINKGATE_*
// environment equivalents, and the mapping of errors to exit codes.
//
// It imports only the standard library.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// EnvPrefix is prepended to a flag's upper-cased name (dashes become
// underscores) to form its environment equivalent: --max-url-length is
// LINKGATE_MAX_URL_LENGTH.
const EnvPrefix = "LINKGATE_"

// Env is what a subcommand may touch of its process: never os.Getenv,
// os.Args or os.Stdout directly, so tests can run it in-process.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// UsageError is a mistake on the command line. Commands exit with status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitCode maps the error a command returned to its process exit status:
// 0 for nil and for --help, 2 for usage errors, 1 for anything else.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

// Exit reports err on stderr (unless it is nil or --help) and returns the exit
// status for it. It is what every main calls around run.
func Exit(err error, name string, stderr io.Writer) int {
	code := ExitCode(err)
	if code != 0 {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return code
}

// EnvName returns the environment variable that stands for a flag.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// NewFlagSet returns a flag set that reports errors instead of exiting, and
// prints usage (synopsis, description, every flag with its environment
// equivalent) to out on --help or a parse error.
func NewFlagSet(name, synopsis, description string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { PrintUsage(fs, synopsis, description) }
	return fs
}

// PrintUsage writes the usage text of fs to its output.
func PrintUsage(fs *flag.FlagSet, synopsis, description string) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: %s\n", synopsis)
	if description != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(description, "\n"))
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\nFlags (each also read from the environment variable shown; a flag wins):\n")
	for _, n := range names {
		f := fs.Lookup(n)
		typ, help := flag.UnquoteUsage(f)
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		head := "  " + dash + n
		if typ != "" {
			head += " " + typ
		}
		fmt.Fprintf(w, "%s\n      %s", head, help)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, " [$%s]\n", EnvName(n))
	}
}

// Parse parses args into fs, then fills every flag that was not given on the
// command line from its LINKGATE_* environment variable, if set. Flags win
// over the environment. --help returns flag.ErrHelp after printing usage;
// any other problem returns a *UsageError.
func Parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return &UsageError{Err: err}
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := EnvName(f.Name)
		v, ok := lookup(getenv, env)
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("invalid value %q for %s: %v", v, env, err))
		}
	})
	if len(errs) > 0 {
		fs.Usage()
		return &UsageError{Err: errors.Join(errs...)}
	}
	return nil
}

// lookup treats an empty variable as unset, so LINKGATE_X= does not override
// a default with the empty string.
func lookup(getenv func(string) string, name string) (string, bool) {
	v := getenv(name)
	return v, v != ""
}
