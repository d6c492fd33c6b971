// The data layer: datasets, transforms and the DataLoader (tandem::data).
#pragma once

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/idx.h"
#include "data/loader_state.h"
#include "data/mnist.h"
#include "data/transforms.h"
