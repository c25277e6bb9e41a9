//go:build !unix

package builtin

// openNoBlock is O_NONBLOCK where the platform has it.
const openNoBlock = 0
