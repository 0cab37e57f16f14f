// SPDX-License-Identifier: Apache-2.0

// The __libc_single_threaded flag of glibc 2.32 and later, for a library linked against glibc
// 2.31 with GCC 12's static libstdc++: that libstdc++ was compiled against a newer glibc, and its
// reference counting reads the flag to skip atomic instructions while a process has one thread.
// Zero means "there may be other threads", so every such update stays atomic, which is correct in
// any process. Hidden: the library reads its own copy, not the C library's.
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
