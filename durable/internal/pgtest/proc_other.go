//go:build !unix

package pgtest

import (
	"errors"
	"os"
	"os/exec"
)

// processesSupported: a throwaway server's processes cannot be run and signalled here.
const processesSupported = false

var errUnsupported = errors.New("throwaway PostgreSQL servers need a unix system")

var sigStop, sigCont, sigTerm os.Signal = os.Kill, os.Kill, os.Kill

type owner struct{}

func lookupOwner() (owner, error)     { return owner{}, errUnsupported }
func (owner) apply(*exec.Cmd)         {}
func (owner) chown(string) error      { return errUnsupported }
func signal(int, os.Signal) error     { return errUnsupported }
func procStat(int) (byte, int, error) { return 0, 0, errUnsupported }
func children(int) ([]int, error)     { return nil, errUnsupported }
