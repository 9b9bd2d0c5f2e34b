# kvx_mpi.m4 - MPI (required), found through its compiler wrapper.
#
# --with-mpi=DIR uses DIR/bin/mpicc; otherwise mpicc from PATH (or $MPICC).
# The wrapper is asked for its flags (Open MPI: --showme:compile/--showme:link,
# MPICH: -compile_info/-link_info) so that kvx keeps the user's CC, and the
# result is proved by linking a call to MPI_Init.
AC_DEFUN([KVX_CHECK_MPI], [
    KVX_DEP_ARG([mpi], [MPI installation whose bin/ holds mpicc (required; mpicc from PATH by default)])
    AS_IF([test "x$kvx_with_mpi" = xno], [AC_MSG_ERROR([kvx cannot be built without MPI])])
    AS_CASE(["x$kvx_with_mpi"],
        [xyes|xcheck], [AC_PATH_PROGS([MPICC], [mpicc mpicc.openmpi mpicc.mpich])],
        [AC_PATH_PROGS([MPICC], [mpicc], [], [$kvx_with_mpi/bin])])
    AS_CASE(["x$kvx_with_mpi"],
        [xyes|xcheck], [AC_PATH_PROGS([MPIRUN], [mpirun mpiexec])],
        [AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [], [$kvx_with_mpi/bin])])
    kvx_have_mpi=no
    AS_IF([test -n "$MPICC"], [
        AC_MSG_CHECKING([MPI flags from $MPICC])
        AS_IF([MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null` && MPI_LIBS=`$MPICC --showme:link 2>/dev/null`],
              [kvx_mpi_flavor=openmpi],
              [MPI_CFLAGS=`$MPICC -compile_info 2>/dev/null | cut -d' ' -f2- | tr ' ' '\n' | grep -E '^-(I|D)' | tr '\n' ' '`
               MPI_LIBS=`$MPICC -link_info 2>/dev/null | cut -d' ' -f2- | tr ' ' '\n' | grep -E '^-(L|l|Wl)' | tr '\n' ' '`
               kvx_mpi_flavor=mpich])
        AC_MSG_RESULT([$kvx_mpi_flavor])
        kvx_save_CPPFLAGS=$CPPFLAGS; kvx_save_LIBS=$LIBS
        CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
        AC_MSG_CHECKING([whether an MPI program links])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[MPI_Init(0, 0); MPI_Finalize();]])],
            [AC_MSG_RESULT([yes]); kvx_have_mpi=yes], [AC_MSG_RESULT([no])])
        CPPFLAGS=$kvx_save_CPPFLAGS; LIBS=$kvx_save_LIBS
    ])
    AS_IF([test "x$kvx_have_mpi" != xyes],
          [KVX_DEP_MISSING([mpi], [required], [need a working mpicc (Debian: libopenmpi-dev openmpi-bin)])])
    AS_IF([test -z "$MPIRUN"], [AC_MSG_WARN([no mpirun found: the MPI tests will be skipped])])
    kvx_how_mpi="$MPICC ($kvx_mpi_flavor)"
    AC_SUBST([MPI_CFLAGS])
    AC_SUBST([MPI_LIBS])
    AC_SUBST([MPIRUN])
])
