# kvx_fuzz.m4 - clang's libFuzzer (optional): the msg_decode() fuzzer in
# tests/fuzz/. kvx itself is built with $CC; the fuzz target alone is
# compiled by clang through its own rule in Makefile.am.
#
# FUZZ_CC names the clang to use (default: clang-14, else clang from PATH).
# It is used only if it links a program with -fsanitize=fuzzer,address,undefined
# (Debian: clang and libclang-rt-14-dev); otherwise tests/fuzz/run-fuzz.sh
# skips the fuzzing and says why.
AC_DEFUN([KVX_CHECK_FUZZER], [
    AC_ARG_VAR([FUZZ_CC], [clang that builds the libFuzzer target (default: clang-14 or clang)])
    AC_PATH_PROGS([FUZZ_CC], [clang-14 clang])
    kvx_how_fuzzer=no
    AS_IF([test -n "$FUZZ_CC"], [
        AC_MSG_CHECKING([whether $FUZZ_CC links a libFuzzer target])
        cat > conftest_fuzz.c <<_KVX_EOF
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return size > 0 && data[[0]] == 1; }
_KVX_EOF
        AS_IF([$FUZZ_CC -fsanitize=fuzzer,address,undefined conftest_fuzz.c -o conftest_fuzz$EXEEXT >&AS_MESSAGE_LOG_FD 2>&1],
              [kvx_how_fuzzer="$FUZZ_CC"; AC_MSG_RESULT([yes])],
              [AC_MSG_RESULT([no])
               AC_MSG_WARN([$FUZZ_CC cannot link -fsanitize=fuzzer (Debian: libclang-rt-14-dev): the fuzzer will be skipped])])
        rm -f conftest_fuzz.c conftest_fuzz$EXEEXT
    ])
    AM_CONDITIONAL([KVX_HAVE_FUZZER], [test "x$kvx_how_fuzzer" != xno])
])
