#include "epmpi.h"

MPI_Comm epmpi_comm_world(void) { return MPI_COMM_WORLD; }

MPI_Comm epmpi_comm_null(void) { return MPI_COMM_NULL; }

MPI_Request epmpi_request_null(void) { return MPI_REQUEST_NULL; }

MPI_Datatype epmpi_datatype(int which) {
	switch (which) {
	case EPMPI_BYTE:
		return MPI_BYTE;
	case EPMPI_INT32:
		return MPI_INT32_T;
	case EPMPI_INT64:
		return MPI_INT64_T;
	case EPMPI_DOUBLE:
		return MPI_DOUBLE;
	case EPMPI_DOUBLE_INT:
		return MPI_DOUBLE_INT;
	}
	return MPI_DATATYPE_NULL;
}

MPI_Op epmpi_op(int which) {
	switch (which) {
	case EPMPI_OP_SUM:
		return MPI_SUM;
	case EPMPI_OP_MIN:
		return MPI_MIN;
	case EPMPI_OP_MAX:
		return MPI_MAX;
	case EPMPI_OP_MINLOC:
		return MPI_MINLOC;
	case EPMPI_OP_MAXLOC:
		return MPI_MAXLOC;
	}
	return MPI_OP_NULL;
}

int epmpi_errors_return(MPI_Comm comm) {
	return MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

int epmpi_split_shared(MPI_Comm comm, int key, MPI_Comm *out) {
	return MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, out);
}
