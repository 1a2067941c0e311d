package record

import "io"

// CreateWith is Create with open in place of os.OpenFile, so that a test's
// files fail where it chooses.
func CreateWith(dir string, opts *Options, open func(name string, flag int) (io.WriteCloser, error)) (*Writer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return create(dir, o, open)
}
