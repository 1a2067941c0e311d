package sampler

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"io/fs"
)

// fixtureZip is traces/repo, archived by TestFixtureArchive (go test
// ./sampler -run TestFixtureArchive -update): the repository is a module of
// its own, which go:embed cannot take as a directory.
//
//go:embed traces/repo.zip
var fixtureZip []byte

// FixtureRepo is the repository the embedded traces were recorded on (the
// calc module, its bugs not yet fixed), as a read-only file system. Copy it
// (os.CopyFS) to run a trace's tool calls for real.
func FixtureRepo() fs.FS {
	zr, err := zip.NewReader(bytes.NewReader(fixtureZip), int64(len(fixtureZip)))
	if err != nil {
		panic("sampler: embedded fixture archive: " + err.Error()) // checked by TestFixtureArchive
	}
	return zr
}
