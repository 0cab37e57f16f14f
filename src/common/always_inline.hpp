// SPDX-License-Identifier: Apache-2.0
// FUSEDNN_ALWAYS_INLINE: an inline function the compiler must inline into every caller, for the
// small functions that hot loops call and that must vanish into them for the loop to vectorise.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FUSEDNN_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define FUSEDNN_ALWAYS_INLINE __forceinline
#else
#define FUSEDNN_ALWAYS_INLINE inline
#endif
