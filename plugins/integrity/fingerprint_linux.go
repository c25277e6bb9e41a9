package integrity

import "syscall"

func fingerprint(path string) (Fingerprint, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return Fingerprint{}, false
	}
	return Fingerprint{
		Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
	}, true
}
