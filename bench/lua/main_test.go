package lua_test

import (
	"os"
	"testing"

	"github.com/linkgate/linkgate/internal/testdep"
)

func TestMain(m *testing.M) {
	testdep.SpareProcs(8) // the in-test targets share the generator's process
	os.Exit(m.Run())
}
