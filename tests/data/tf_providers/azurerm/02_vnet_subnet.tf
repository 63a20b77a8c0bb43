provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "net" {
  name     = "rg-network"
  location = "northeurope"
}

resource "azurerm_virtual_network" "main" {
  name                = "vnet-main"
  address_space       = ["10.0.0.0/16"]
  location            = azurerm_resource_group.net.location
  resource_group_name = azurerm_resource_group.net.name
}

resource "azurerm_subnet" "app" {
  name                 = "snet-app"
  resource_group_name  = azurerm_resource_group.net.name
  virtual_network_name = azurerm_virtual_network.main.name
  address_prefixes     = ["10.0.1.0/24"]

  delegation {
    name = "web"
    service_delegation {
      name = "Microsoft.Web/serverFarms"
    }
  }
}
