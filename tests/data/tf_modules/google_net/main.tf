# A Google network module; the root itself names no google resource.
module "network" {
  source = "./modules/network"

  name    = "core"
  region  = "us-central1"
  subnets = { app = "10.10.0.0/24", db = "10.10.1.0/24" }
}

output "network" {
  value = module.network.self_link
}
