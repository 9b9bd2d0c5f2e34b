# kvx_compiler.m4 - warnings, debug and sanitizer switches.
AC_DEFUN([KVX_COMPILER_FLAGS], [
    AC_ARG_ENABLE([debug], [AS_HELP_STRING([--enable-debug], [build with -O0 -g3 and debug-level logging compiled in])],
                  [], [enable_debug=no])
    AC_ARG_ENABLE([asan], [AS_HELP_STRING([--enable-asan], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
                  [], [enable_asan=no])
    AC_ARG_ENABLE([tsan], [AS_HELP_STRING([--enable-tsan], [build with ThreadSanitizer])],
                  [], [enable_tsan=no])
    AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [turn warnings into errors (CI does)])],
                  [], [enable_werror=no])
    AS_IF([test "x$enable_asan" = xyes && test "x$enable_tsan" = xyes],
          [AC_MSG_ERROR([--enable-asan and --enable-tsan cannot be combined])])

    KVX_CFLAGS="-Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter"
    AS_IF([test "x$enable_werror" = xyes], [KVX_CFLAGS="$KVX_CFLAGS -Werror"])
    AS_IF([test "x$enable_debug" = xyes],
          [KVX_CFLAGS="$KVX_CFLAGS -O0 -g3"; AC_DEFINE([KVX_DEBUG], [1], [Define to 1 in debug builds])])
    KVX_SAN_FLAGS=
    AS_IF([test "x$enable_asan" = xyes],
          [KVX_SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"])
    AS_IF([test "x$enable_tsan" = xyes], [KVX_SAN_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"])
    KVX_CFLAGS="$KVX_CFLAGS $KVX_SAN_FLAGS"
    KVX_LDFLAGS="$KVX_SAN_FLAGS"
    AC_SUBST([KVX_CFLAGS])
    AC_SUBST([KVX_LDFLAGS])
    AC_SUBST([KVX_SAN_FLAGS])
    AM_CONDITIONAL([KVX_SANITIZED], [test -n "$KVX_SAN_FLAGS"])
])
