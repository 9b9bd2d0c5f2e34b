# kvx_dep.m4 - the shared rules every dependency macro follows.
#
# KVX_DEP_ARG(NAME, HELP) declares --with-NAME[=DIR] and sets kvx_with_NAME to
# "check" (not given), "yes", "no" or a directory.
#
# KVX_DEP_MISSING(NAME, REQUIRED, WHY) reports a dependency that was not found:
# a hard error when the user asked for it or it is required, a warning when it
# was only probed for.
AC_DEFUN([KVX_DEP_ARG], [
    AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$2])],
                [kvx_with_$1=$withval], [kvx_with_$1=check])
])

AC_DEFUN([KVX_DEP_MISSING], [
    AS_IF([test "x$kvx_with_$1" != xcheck && test "x$kvx_with_$1" != xno],
          [AC_MSG_ERROR([--with-$1 was given but $1 is not usable: $3])],
          [test "x$2" = xrequired],
          [AC_MSG_ERROR([$1 is required and was not found: $3 (use --with-$1=DIR)])],
          [AC_MSG_WARN([$1 not found, building without it: $3])])
])

# KVX_DEP_PKG(NAME, PKGNAME, HEADER, FUNC, LIB) finds NAME through pkg-config,
# then DIR/include + DIR/lib* when --with-NAME=DIR was given, then the default
# search path (a guess, which earns a warning). Sets NAME_CFLAGS, NAME_LIBS and
# kvx_have_NAME=yes|no and kvx_how_NAME (how it was found, for the summary).
AC_DEFUN([KVX_DEP_PKG], [
    kvx_have_$1=no
    kvx_how_$1=
    AS_CASE(["x$kvx_with_$1"],
      [xno], [],
      [xyes|xcheck], [
        PKG_CHECK_MODULES(m4_toupper([$1]), [$2],
            [kvx_have_$1=yes
             kvx_mod=`echo "$2" | cut -d' ' -f1`
             kvx_how_$1="pkg-config $kvx_mod `$PKG_CONFIG --modversion $kvx_mod`"],
            [kvx_have_$1=guess])],
      [
        m4_toupper([$1])_CFLAGS="-I$kvx_with_$1/include"
        m4_toupper([$1])_LIBS="-L$kvx_with_$1/lib64 -L$kvx_with_$1/lib -Wl,-rpath,$kvx_with_$1/lib64 -Wl,-rpath,$kvx_with_$1/lib $5"
        kvx_have_$1=dir
      ])
    AS_IF([test "x$kvx_have_$1" = xguess], [
        m4_toupper([$1])_CFLAGS=
        m4_toupper([$1])_LIBS="$5"
    ])
    AS_IF([test "x$kvx_have_$1" = xguess || test "x$kvx_have_$1" = xdir], [
        kvx_save_CPPFLAGS=$CPPFLAGS; kvx_save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $m4_toupper([$1])_CFLAGS"
        LIBS="$m4_toupper([$1])_LIBS $LIBS"
        AC_CHECK_HEADER([$3], [
            AC_MSG_CHECKING([for $4 in $5])
            AC_LINK_IFELSE([AC_LANG_CALL([], [$4])],
                [AC_MSG_RESULT([yes])
                 AS_IF([test "x$kvx_have_$1" = xdir],
                       [kvx_how_$1="--with-$1=$kvx_with_$1"],
                       [kvx_how_$1="default search path (guessed)"
                        AC_MSG_WARN([$1 has no pkg-config file; using $3 and $5 from the default search path])])
                 kvx_have_$1=yes],
                [AC_MSG_RESULT([no]); kvx_have_$1=no])
        ], [kvx_have_$1=no])
        CPPFLAGS=$kvx_save_CPPFLAGS; LIBS=$kvx_save_LIBS
    ])
    AC_SUBST(m4_toupper([$1])_CFLAGS)
    AC_SUBST(m4_toupper([$1])_LIBS)
])
