package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// mapFiles opens file up to n times, maps a page of it and closes the
// descriptor: the mapping keeps each struct file alive, so RLIMIT_NOFILE
// does not count them, only the memory they take. It prints how many it
// held and why it stopped.
func mapFiles(file, count string) {
	n, _ := strconv.Atoi(count)
	held := 0
	var stop error
	for ; held < n; held++ {
		fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			stop = fmt.Errorf("open: %w", err)
			break
		}
		_, err = unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
		unix.Close(fd)
		if err != nil {
			stop = fmt.Errorf("mmap: %w", err)
			break
		}
	}
	fmt.Printf("mapfiles held %d stop=%v\n", held, stop)
	os.Stdout.Sync()
}
