/* dlopen/dlsym for libnccl, with the loader's message read on the calling
 * thread (dlerror is per thread). */
#ifndef EPBENCH_NCCL_DL_H
#define EPBENCH_NCCL_DL_H

#include <stddef.h>

/* ep_nccl_dl_open opens name with RTLD_NOW|RTLD_LOCAL; on failure it returns
 * NULL and copies dlerror() into err. */
void* ep_nccl_dl_open(const char* name, char* err, size_t err_len);

/* ep_nccl_dl_sym looks name up in handle; NULL when absent, with dlerror()
 * in err. */
void* ep_nccl_dl_sym(void* handle, const char* name, char* err, size_t err_len);

/* ep_nccl_dl_pin marks the library opened as name RTLD_NODELETE, so that a
 * later dlclose leaves its code mapped. Returns non-zero on failure. */
int ep_nccl_dl_pin(const char* name, char* err, size_t err_len);

/* ep_nccl_dl_path copies the path of the file that holds sym into path;
 * returns non-zero when the loader cannot say. */
int ep_nccl_dl_path(void* sym, char* path, size_t path_len);

/* ep_nccl_dl_close closes handle; non-zero on failure, with dlerror() in err. */
int ep_nccl_dl_close(void* handle, char* err, size_t err_len);

#endif
