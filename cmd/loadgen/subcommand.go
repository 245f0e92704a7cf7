package main

import (
	"flag"
	"io"
	"os"
	"runtime"
	"time"
)

// subcommand is what loadgen's subcommands (wait, hook, wake) share:
// their flag set with -data, -server and -keep, and a work directory of
// their own with the report's first line.
type subcommand struct {
	name   string
	fs     *flag.FlagSet
	data   *string
	server *string
	keep   *bool
}

// newSubcommand makes the flag set of `loadgen name`; serverUse says
// what -server is for. The subcommand adds its own flags to fs.
func newSubcommand(name, serverUse string, stderr io.Writer) *subcommand {
	fs := flag.NewFlagSet("loadgen "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &subcommand{
		name:   name,
		fs:     fs,
		data:   fs.String("data", os.TempDir(), "`directory` for the work directory"),
		server: fs.String("server", "", serverUse),
		keep:   fs.Bool("keep", false, "keep the work directory"),
	}
}

// begin makes the work directory and prints the report's first line;
// done removes the directory, unless -keep.
func (c *subcommand) begin(stdout io.Writer) (work string, r *report, done func(), err error) {
	work, err = os.MkdirTemp(*c.data, "mailroom-loadgen-"+c.name+"-")
	if err != nil {
		return "", nil, nil, err
	}
	r = &report{w: stdout}
	r.printf("Mailroom loadgen %s: %s, %s/%s, %d CPUs; load average at start: %s\n\n", c.name, time.Now().Format("2006-01-02 15:04"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), loadAvg())
	return work, r, func() {
		if !*c.keep {
			os.RemoveAll(work)
		}
	}, nil
}
