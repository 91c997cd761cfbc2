package localmode

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateIsKeptOnlyOnceSaved(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is written before Save: the emulator starts a new bucket
	// only in an empty directory.
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Fatalf("Open wrote %d entries into the data directory", len(entries))
	}
	ln, err := s.Listen("bridge", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if again.Token() != s.Token() || again.TokenFile() != s.TokenFile() {
		t.Errorf("token after reopening: %q in %s, want %q in %s", again.Token(), again.TokenFile(), s.Token(), s.TokenFile())
	}
	ln, err = again.Listen("bridge", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln.Addr().String() != addr {
		t.Errorf("listening again on %s, want the last address %s while it is free", ln.Addr(), addr)
	}
	// Taken, the address moves rather than failing.
	third, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	moved, err := third.Listen("bridge", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if moved.Addr().String() == addr {
		t.Errorf("listened on a taken address %s", addr)
	}
	// An address given in full is used as given.
	if _, err := third.Listen("bridge", addr); err == nil {
		t.Errorf("listening on the taken %s succeeded", addr)
	} else if _, ok := err.(*net.OpError); !ok {
		t.Errorf("listen error %T: %v", err, err)
	}
}

func TestABrokenTokenFileIsNamed(t *testing.T) {
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, stateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, stateDir, "token")
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(data)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("Open with a broken token: %v, want an error naming %s and what to do", err, path)
	}
}

func TestWithoutDataNothingOutlivesClose(t *testing.T) {
	s, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.TokenFile()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(s.TokenFile()); !os.IsNotExist(err) {
		t.Errorf("token file after Close: %v", err)
	}
}

func TestEnvFileIsReplacedWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "local.env")
	if err := WriteEnv(path, "export A=1\n"); err != nil {
		t.Fatal(err)
	}
	if err := WriteEnv(path, "export A=2\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "export A=2\n" {
		t.Errorf("env file: %q", got)
	}
}
