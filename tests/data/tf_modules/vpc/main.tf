# A VPC module with inputs (string, list, map) and outputs the root uses.
module "vpc" {
  source = "./modules/vpc"

  name = "core"
  cidr = "10.20.0.0/16"
  azs  = ["us-east-1a", "us-east-1b"]
  tags = { Team = "platform" }
}

resource "aws_security_group" "web" {
  name   = "web"
  vpc_id = module.vpc.vpc_id

  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = [module.vpc.cidr]
  }
}

output "subnets" {
  value = module.vpc.subnet_ids
}
