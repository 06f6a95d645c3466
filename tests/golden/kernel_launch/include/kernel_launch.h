/* A kernel launch in the manner of cuLaunchKernel (the spec's kernel_launch: packed and called in C). */
#ifndef KERNEL_LAUNCH_H
#define KERNEL_LAUNCH_H

typedef enum { KL_SUCCESS = 0, KL_ERROR_INVALID_VALUE = 1 } klStatus;
typedef struct kl_function_st *klFunction;
typedef struct kl_stream_st *klStream;

/* INVALID_VALUE for more than 1024 threads per block */
klStatus klLaunch(klFunction f, unsigned int gridX, unsigned int gridY, unsigned int gridZ,
                  unsigned int blockX, unsigned int blockY, unsigned int blockZ, unsigned int sharedBytes,
                  klStream stream, void **params, void **extra);
/* The "kernel"'s parameter sizes (what klLaunch reads), and what the last launch received: value 0 the
   function, 1-7 the dimensions, 8 the stream, 9 params == NULL, 10 extra == NULL, 11 the launch count;
   param: parameter i's bytes (up to 8) as a little-endian number. */
klStatus klLaunchParamSize(int index, unsigned int size);
klStatus klLastLaunchValue(int index, unsigned long long *value);
klStatus klLastLaunchParam(int index, unsigned long long *value);
#endif
