provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "nat" {
  name     = "rg-nat"
  location = "westeurope"
}

resource "azurerm_public_ip" "nat" {
  name                = "pip-nat"
  location            = azurerm_resource_group.nat.location
  resource_group_name = azurerm_resource_group.nat.name
  allocation_method   = "Static"
  sku                 = "Standard"
  zones               = ["1"]
}

resource "azurerm_nat_gateway" "main" {
  name                    = "nat-main"
  location                = azurerm_resource_group.nat.location
  resource_group_name     = azurerm_resource_group.nat.name
  sku_name                = "Standard"
  idle_timeout_in_minutes = 10

  timeouts {
    create = "20m"
  }
}

resource "azurerm_nat_gateway_public_ip_association" "main" {
  nat_gateway_id       = azurerm_nat_gateway.main.id
  public_ip_address_id = azurerm_public_ip.nat.id
}

resource "azurerm_virtual_network" "egress" {
  name                = "vnet-egress"
  address_space       = ["10.50.0.0/16"]
  location            = azurerm_resource_group.nat.location
  resource_group_name = azurerm_resource_group.nat.name

  encryption {
    enforcement = "AllowUnencrypted"
  }
}
