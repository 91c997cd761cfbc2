//go:build e2e

package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the stack, with its log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// procs stops every process it started, by PID, in reverse order.
type procs struct {
	mu   sync.Mutex
	list []*proc
	logs string
}

// start runs bin with args, its output in logs/<name>.log.
func (ps *procs) start(name, bin string, args []string, env []string, dir string) (*proc, error) {
	logPath := filepath.Join(ps.logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace
// (argocd-cmp-server ignores SIGTERM).
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// stopAll stops every process, newest first.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop(5 * time.Second)
	}
}

// freePort returns a port free on 127.0.0.1 now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls check until it succeeds, the process dies, or timeout.
func waitFor(what string, p *proc, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s: process exited (%v); see %s", what, p.err, p.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if p != nil {
		return fmt.Errorf("%s: not ready after %s: %v; see %s", what, timeout, err, p.log)
	}
	return fmt.Errorf("%s: not ready after %s: %v", what, timeout, err)
}

// listening is a waitFor check: something accepts connections on addr.
func listening(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
}

// sysProcAttr puts a process in its own group, so stopping it stops what it
// started (a plugin process of argocd-cmp-server), and has the kernel kill
// it if the test binary dies without stopping it (a go test -timeout panic).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
