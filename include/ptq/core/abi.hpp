// The build switches every ptq header agrees on, first among them whether the throwing wrappers
// exist. Included by every header before it opens `namespace ptq`.
//
// PTQ_EXCEPTIONS: 1 when the translation unit is compiled with exceptions (the default is read
// from the compiler), 0 under -fno-exceptions. Define it yourself to force either.
//
// Every declaration lives in `ptq::PTQ_ABI_NAMESPACE`, an inline namespace whose name depends on
// PTQ_EXCEPTIONS, so user code keeps writing `ptq::result<T>` while a -fno-exceptions object and
// an exceptions object mangle ptq's inline functions differently: linking the two cannot pick
// one TU's body of a function for the other's callers (an ODR violation the linker would not
// report). The same technique as toml++'s `ex` / `noex` namespaces.
// Depends on: the standard library.
#pragma once

#if !defined(PTQ_EXCEPTIONS)
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define PTQ_EXCEPTIONS 1
#else
#define PTQ_EXCEPTIONS 0
#endif
#endif

#if PTQ_EXCEPTIONS
#define PTQ_ABI_NAMESPACE abi_v0_ex
#else
#define PTQ_ABI_NAMESPACE abi_v0_noex
#endif
