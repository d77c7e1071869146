package bolt

import "syscall"

// mmapFlags prefault the whole file when it is mapped (at open and after
// the map grows), so the first reads of each page after a start do not
// each take a page fault on the redirect path.
const mmapFlags = syscall.MAP_POPULATE
