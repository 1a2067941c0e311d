package sampler

import (
	"archive/zip"
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite traces/repo.zip from traces/repo")

// archiveRepo zips dir deterministically: paths in walk order, one fixed
// time, so that the same tree always gives the same bytes.
func archiveRepo(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: zip.Deflate, Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFixtureArchive checks that the embedded archive is traces/repo as it
// is, file for file, and that FixtureRepo opens it.
func TestFixtureArchive(t *testing.T) {
	want := archiveRepo(t, "traces/repo")
	if *update {
		if err := os.WriteFile("traces/repo.zip", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(fixtureZip, want) {
		t.Fatal("traces/repo.zip is stale: go test ./sampler -run TestFixtureArchive -update")
	}
	data, err := fs.ReadFile(FixtureRepo(), "go.mod")
	if err != nil || !bytes.Contains(data, []byte("module example.com/calc")) {
		t.Fatalf("go.mod of the fixture: %q, %v", data, err)
	}
}
