# An application module that calls a role module of its own (nested modules).
module "app" {
  source = "./modules/app"

  name          = "billing"
  instance_type = "t3.micro"
}

output "instance_id" {
  value = module.app.instance_id
}
