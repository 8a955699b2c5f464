// Accessors for Open MPI handles that are macros over the addresses of
// library globals, which cgo cannot evaluate.
#ifndef EPBENCH_EPMPI_H
#define EPBENCH_EPMPI_H

#include <mpi.h>

// Datatypes and operations are selected by small integers shared with Go.
enum {
	EPMPI_BYTE = 1,
	EPMPI_INT32 = 2,
	EPMPI_INT64 = 3,
	EPMPI_DOUBLE = 4,
	EPMPI_DOUBLE_INT = 5,
};

enum {
	EPMPI_OP_SUM = 1,
	EPMPI_OP_MIN = 2,
	EPMPI_OP_MAX = 3,
	EPMPI_OP_MINLOC = 4,
	EPMPI_OP_MAXLOC = 5,
};

// Layout of one MPI_DOUBLE_INT element.
typedef struct {
	double value;
	int rank;
} epmpi_double_int;

MPI_Comm epmpi_comm_world(void);
MPI_Comm epmpi_comm_null(void);
MPI_Request epmpi_request_null(void);
MPI_Datatype epmpi_datatype(int which);
MPI_Op epmpi_op(int which);

// Installs MPI_ERRORS_RETURN so failures come back as codes instead of
// aborting the job.
int epmpi_errors_return(MPI_Comm comm);

int epmpi_split_shared(MPI_Comm comm, int key, MPI_Comm *out);

#endif
