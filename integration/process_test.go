//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listenerEnv makes this test binary a stand-in for a stack process: it
// listens on the ports given as arguments, as etcd or Argo CD do, and
// exits with Go's own bind error when one is taken.
const listenerEnv = "BUCKETOPS_TEST_LISTENER"

func init() {
	if os.Getenv(listenerEnv) == "" {
		return
	}
	for _, port := range os.Args[1:] {
		if _, err := net.Listen("tcp", "127.0.0.1:"+port); err != nil {
			fmt.Fprintln(os.Stderr, err) // listen tcp 127.0.0.1:P: bind: address already in use
			os.Exit(1)
		}
	}
	fmt.Println("listening on", os.Args[1:])
	select {}
}

// startListener starts the stand-in on ports through ps.
func startListener(ps *procs, name string) func(ports []int) (*proc, error) {
	return func(ports []int) (*proc, error) {
		var args []string
		for _, p := range ports {
			args = append(args, strconv.Itoa(p))
		}
		return ps.start(name, os.Args[0], args, append(os.Environ(), listenerEnv+"=1"), "")
	}
}

func listenersReady(p *proc, ports []int) error {
	return waitFor(p.name, p, 10*time.Second, listening(fmt.Sprintf("127.0.0.1:%d", ports[0])))
}

func TestPickPorts(t *testing.T) {
	t.Run("the ports of one process are distinct, however often they are picked", func(t *testing.T) {
		for i := range 10000 {
			ports, err := pickPorts(3)
			if err != nil {
				t.Fatal(err)
			}
			if ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
				t.Fatalf("pick %d: pickPorts(3) = %v: one process would bind a port twice", i, ports)
			}
		}
	})
	t.Run("the picked ports are free once returned", func(t *testing.T) {
		ports, err := pickPorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d of %v: %v", p, ports, err)
			}
			ln.Close()
		}
	})
}

func TestStartOnPorts(t *testing.T) {
	// taken is a port another program binds between the pick and the start.
	taken := func(t *testing.T) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}

	t.Run("a start on a port taken in the meantime is retried on fresh ports", func(t *testing.T) {
		ps := &procs{logs: t.TempDir()}
		t.Cleanup(ps.stopAll)
		busy := taken(t)
		picks := 0
		ps.pick = func(n int) ([]int, error) {
			picks++
			if picks == 1 {
				ports, err := pickPorts(n - 1)
				return append(ports, busy), err
			}
			return pickPorts(n)
		}
		p, ports, err := ps.startOnPorts("metrics-and-probe", 2, startListener(ps, "metrics-and-probe"), listenersReady)
		if err != nil {
			t.Fatalf("startOnPorts: %v", err)
		}
		if picks != 2 || ports[0] == busy || ports[1] == busy {
			t.Errorf("started on %v after %d picks, want a second pick without the taken port %d", ports, picks, busy)
		}
		if err := listensOn(p.cmd.Process.Pid, ports); err != nil {
			t.Error(err)
		}
		if log, _ := os.ReadFile(p.log); !strings.Contains(string(log), "address already in use") {
			t.Errorf("the first attempt's log has no bind error:\n%s", log)
		}
	})

	t.Run("the taken port answering the readiness check is not taken for the process", func(t *testing.T) {
		// The port the check dials is the taken one: something answers, but
		// not the process, which exited.
		ps := &procs{logs: t.TempDir()}
		t.Cleanup(ps.stopAll)
		busy := taken(t)
		picks := 0
		ps.pick = func(n int) ([]int, error) {
			picks++
			if picks == 1 {
				return []int{busy}, nil
			}
			return pickPorts(n)
		}
		_, ports, err := ps.startOnPorts("one-port", 1, startListener(ps, "one-port"), listenersReady)
		if err != nil {
			t.Fatalf("startOnPorts: %v", err)
		}
		if ports[0] == busy {
			t.Errorf("reported ready on the taken port %d", busy)
		}
	})

	t.Run("a start failing on taken ports every time gives up and says so", func(t *testing.T) {
		ps := &procs{logs: t.TempDir()}
		t.Cleanup(ps.stopAll)
		busy := taken(t)
		ps.pick = func(int) ([]int, error) { return []int{busy}, nil }
		_, _, err := ps.startOnPorts("always-taken", 1, startListener(ps, "always-taken"), listenersReady)
		if !errors.Is(err, errPortTaken) || !strings.Contains(err.Error(), strconv.Itoa(portAttempts)+" attempts") {
			t.Errorf("err = %v, want errPortTaken after %d attempts", err, portAttempts)
		}
	})

	t.Run("a start failing for another reason is not retried", func(t *testing.T) {
		ps := &procs{logs: t.TempDir()}
		t.Cleanup(ps.stopAll)
		starts := 0
		run := func(ports []int) (*proc, error) {
			starts++
			return ps.start("broken", "/bin/sh", []string{"-c", "echo 'unknown flag: --client-ca-path' >&2; exit 1"}, os.Environ(), "")
		}
		_, _, err := ps.startOnPorts("broken", 1, run, listenersReady)
		if err == nil || errors.Is(err, errPortTaken) || starts != 1 {
			t.Errorf("err = %v after %d starts, want the process's own failure after 1", err, starts)
		}
	})
}

func TestListensOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	t.Run("a port this process listens on is found", func(t *testing.T) {
		if err := listensOn(os.Getpid(), []int{port}); err != nil {
			t.Error(err)
		}
	})
	t.Run("a port another process listens on is not this process's", func(t *testing.T) {
		ps := &procs{logs: t.TempDir()}
		t.Cleanup(ps.stopAll)
		p, ports, err := ps.startOnPorts("other", 1, startListener(ps, "other"), listenersReady)
		if err != nil {
			t.Fatal(err)
		}
		if err := listensOn(os.Getpid(), ports); err == nil {
			t.Errorf("port %d of process %d reported as this process's", ports[0], p.cmd.Process.Pid)
		}
	})
}
