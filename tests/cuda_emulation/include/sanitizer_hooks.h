// Why: the emulation runs CUDA threads as fibers (emulated_device.h), and
// the sanitizers must be told what that means: AddressSanitizer which
// stack is live after each switch, ThreadSanitizer which fiber runs
// (switching implies no ordering, so the fibers of a block are as
// unordered as CUDA threads) and the orderings CUDA does promise
// (barriers, the start and end of a block). Without a sanitizer these are
// no-ops.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif

#ifdef EMU_TSAN
#include <sanitizer/tsan_interface.h>
// The emulation's own books (run queues, barrier counts, the built-in
// variables), which every fiber of an OS thread updates in turn: not
// instrumented, so ThreadSanitizer reports only the kernels' accesses.
#define EMU_BOOKKEEPING __attribute__((no_sanitize("thread")))
#else
#define EMU_BOOKKEEPING
#endif
#ifdef EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace emu::sanitizer {

// ThreadSanitizer's state for a new fiber, and for the running thread.
inline void* create_fiber() {
#ifdef EMU_TSAN
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}
inline void* current_fiber() {
#ifdef EMU_TSAN
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}

// What the running fiber did happens before what any fiber does after
// acquire(sync) following this release(sync).
inline void release(void* sync) {
#ifdef EMU_TSAN
  __tsan_release(sync);
#else
  (void)sync;
#endif
}
inline void acquire(void* sync) {
#ifdef EMU_TSAN
  __tsan_acquire(sync);
#else
  (void)sync;
#endif
}

// Called right before swapcontext to a context with the given stack and
// ThreadSanitizer fiber; fake_stack_save keeps the leaving context's
// AddressSanitizer fake stack.
inline void before_switch(void** fake_stack_save, void* tsan_fiber, const void* stack_bottom,
                          size_t stack_size) {
#ifdef EMU_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, stack_bottom, stack_size);
#else
  (void)fake_stack_save, (void)stack_bottom, (void)stack_size;
#endif
#ifdef EMU_TSAN
  __tsan_switch_to_fiber(tsan_fiber, __tsan_switch_to_fiber_no_sync);
#else
  (void)tsan_fiber;
#endif
}
// Called first thing in the context switched to (fake_stack as saved when
// it left, nullptr in a fiber's first run).
inline void after_switch(void* fake_stack) {
#ifdef EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)fake_stack;
#endif
}

}  // namespace emu::sanitizer
