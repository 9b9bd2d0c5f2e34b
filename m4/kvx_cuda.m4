# kvx_cuda.m4 - CUDA (optional): KV pools in GPU memory.
#
# kvx only needs the CUDA headers at build time: the runtime (libcudart) is
# loaded with dlopen when a context asks for CUDA memory, so one build serves
# nodes with and without a GPU or driver.
AC_DEFUN([KVX_CHECK_CUDA], [
    KVX_DEP_ARG([cuda], [CUDA toolkit (optional; /usr/local/cuda is probed by default)])
    kvx_have_cuda=no
    kvx_how_cuda=
    AS_CASE(["x$kvx_with_cuda"],
        [xno], [kvx_cuda_dirs=],
        [xyes|xcheck], [kvx_cuda_dirs="$CUDA_HOME /usr/local/cuda"],
        [kvx_cuda_dirs="$kvx_with_cuda"])
    for kvx_dir in $kvx_cuda_dirs; do
        AS_IF([test -f "$kvx_dir/include/cuda_runtime_api.h"], [
            CUDA_CFLAGS="-I$kvx_dir/include"
            for kvx_libdir in "$kvx_dir/lib64" "$kvx_dir/lib"; do
                AS_IF([ls "$kvx_libdir"/libcudart.so* >/dev/null 2>&1],
                      [CUDA_LIBDIR=$kvx_libdir; break])
            done
            AS_IF([test -n "$CUDA_LIBDIR"], [
                kvx_have_cuda=yes
                kvx_how_cuda="$kvx_dir (libcudart from $CUDA_LIBDIR, loaded at run time)"
                AS_IF([test "x$kvx_with_cuda" = xcheck],
                      [AC_MSG_NOTICE([CUDA found by probing $kvx_dir; use --with-cuda=DIR or --without-cuda to choose])])
                break])
        ])
    done
    AS_IF([test "x$kvx_with_cuda" != xno && test "x$kvx_have_cuda" != xyes],
          [KVX_DEP_MISSING([cuda], [optional], [no include/cuda_runtime_api.h with lib*/libcudart.so in: $kvx_cuda_dirs])])
    # The runtime's major version: the libcudart.so.N kvx loads by default.
    CUDA_RT_MAJOR=
    AS_IF([test "x$kvx_have_cuda" = xyes],
          [kvx_cudart_version=`sed -n 's/^#define CUDART_VERSION *//p' "${CUDA_CFLAGS#-I}/cuda_runtime_api.h"`
           CUDA_RT_MAJOR=`expr "$kvx_cudart_version" / 1000`
           kvx_how_cuda="$kvx_how_cuda, runtime $CUDA_RT_MAJOR"])
    AS_IF([test "x$kvx_have_cuda" = xyes],
          [AC_DEFINE([KVX_HAVE_CUDA], [1], [Define to 1 when built with CUDA support])
           AC_DEFINE_UNQUOTED([KVX_CUDA_LIBDIR], ["$CUDA_LIBDIR"], [Where libcudart was found at build time])])
    AM_CONDITIONAL([HAVE_CUDA], [test "x$kvx_have_cuda" = xyes])
    AC_SUBST([CUDA_CFLAGS])
    AC_SUBST([CUDA_LIBDIR])
    AC_SUBST([CUDA_RT_MAJOR])
])
