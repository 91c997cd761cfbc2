//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// pick picks a process's ports; nil is pickPorts. Tests set it to
	// hand out a port that is taken.
	pick func(n int) ([]int, error)
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

// running returns the processes started and not ended, in start order.
func (ps *procs) running() []*proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*proc
	for _, p := range ps.list {
		if !p.exited() {
			out = append(out, p)
		}
	}
	return out
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

// pickPorts returns n distinct ports free on 127.0.0.1. Every listener
// stays open until all n are picked: a port closed before the next pick
// can be handed out again, which gave one process the same port twice.
func pickPorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portAttempts is how many times startOnPorts picks ports for one start.
const portAttempts = 5

// errPortTaken is a start that failed because a port it was given was
// bound by something else in the meantime.
var errPortTaken = errors.New("a port was taken")

// startOnPorts starts a process that listens on n loopback ports and
// waits until it is ready. run starts it on the ports given; ready waits,
// until a deadline of its own, for it to serve. The ports are picked
// together (pickPorts) and released just before the start, so another
// program may still bind one in between (an outgoing connection's source
// port is enough): a start whose log then says so is stopped and tried
// again on fresh ports. Ready means ready's check passed and the process
// itself listens on every port, not some other program that took one.
func (ps *procs) startOnPorts(name string, n int, run func(ports []int) (*proc, error), ready func(p *proc, ports []int) error) (*proc, []int, error) {
	pick := ps.pick
	if pick == nil {
		pick = pickPorts
	}
	var last error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		ports, err := pick(n)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: pick %d ports: %w", name, n, err)
		}
		logPath := filepath.Join(ps.logs, name+".log")
		offset := fileSize(logPath)
		p, err := run(ports)
		if err != nil {
			return nil, nil, err
		}
		err = ready(p, ports)
		if err == nil {
			err = waitFor(name+" listening on its ports", p, 10*time.Second, func() error { return listensOn(p.cmd.Process.Pid, ports) })
		}
		if err == nil {
			return p, ports, nil
		}
		if !logSays(logPath, offset, "address already in use") {
			p.stop(5 * time.Second)
			return nil, nil, err
		}
		p.stop(5 * time.Second)
		last = fmt.Errorf("%w: %s on ports %v, attempt %d: %v", errPortTaken, name, ports, attempt, err)
	}
	return nil, nil, fmt.Errorf("%s: %d attempts: %w", name, portAttempts, last)
}

func fileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSays reports whether the log, from offset on, contains text (case
// insensitive: redis says "Address already in use").
func logSays(name string, offset int64, text string) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	b, _ := io.ReadAll(f)
	return bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(text)))
}

// listensOn reports whether process pid holds a listening TCP socket on
// each of ports (any address: Argo CD's controller binds its metrics to
// 0.0.0.0).
func listensOn(pid int, ports []int) error {
	inodes := map[string]int{} // socket inode → port, of listening sockets on ports
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // TCP_LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err == nil && want[int(port)] {
				inodes[fields[9]] = int(port)
			}
		}
		f.Close()
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return err
	}
	held := map[int]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok {
			if port, ok := inodes[strings.TrimSuffix(inode, "]")]; ok {
				held[port] = true
			}
		}
	}
	var missing []int
	for _, p := range ports {
		if !held[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("process %d does not listen on %v", pid, missing)
	}
	return nil
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
