# A security-group module called twice (count), with an object input and optional attributes.
module "sg" {
  source = "./modules/sg"
  count  = 2

  name   = "tier-${count.index}"
  vpc_id = "vpc-0123456789abcdef0"
  rules = [
    { port = 443, cidr = "0.0.0.0/0" },
    { port = 22, cidr = "10.0.0.0/8", description = "ssh from the office" },
  ]
}

resource "aws_instance" "web" {
  ami                    = "ami-0c55b159cbfafe1f0"
  instance_type          = "t3.micro"
  vpc_security_group_ids = module.sg[*].id
}
